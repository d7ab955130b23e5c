"""A benchmark that starts rig servers stops them when it is killed (SIGTERM) or its
terminal closes (SIGHUP), as on Ctrl-C: ``pool.end_on_term`` turns both into
KeyboardInterrupt so its ``finally`` runs (a SIGTERMed mode_cost left four SIGSTOPped
servers behind). The control: without it the finally never runs. Under ``nohup`` (SIGHUP
ignored from the start) a hangup leaves it running, and SIGTERM still stops it cleanly.

The child sets its own starting dispositions (default, or SIGHUP ignored for ``nohup``):
children inherit an ignored signal, so a test run started under ``nohup`` made the control
wait 60 s for a SIGHUP its child ignored."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import asyncio, signal, sys
mode = sys.argv[2]
signal.signal(signal.SIGHUP, signal.SIG_IGN if mode == "nohup" else signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
if mode != "off":
    from tests.real_sglang.rig.pool import end_on_term
    end_on_term()
try:
    print("ready", flush=True)
    asyncio.run(asyncio.sleep(60))  # the benchmarks wait inside asyncio.run
finally:
    open(sys.argv[1], "w").write("servers stopped")
"""


@contextlib.contextmanager
def _child(marker, mode: str) -> Iterator[subprocess.Popen]:
    """The stand-in benchmark in ``mode`` (on, off, nohup), once it says it is ready; killed
    if a test leaves it running."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(marker), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("on", [True, False])
def test_a_killed_benchmark_runs_its_finally(tmp_path, sig, on):
    marker = tmp_path / "marker"
    with _child(marker, "on" if on else "off") as proc:
        proc.send_signal(sig)
        proc.wait(timeout=60)
    if on:
        assert marker.read_text() == "servers stopped"
    else:  # the control: the default action ends it before any finally
        assert not marker.exists() and proc.returncode == -sig


def test_under_nohup_a_hangup_leaves_it_running_and_sigterm_still_stops_it(tmp_path):
    marker = tmp_path / "marker"
    with _child(marker, "nohup") as proc:
        proc.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.5)  # nohup's promise: the hangup is ignored
        assert not marker.exists()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert marker.read_text() == "servers stopped"
