"""A benchmark that starts rig servers stops them when it is killed (SIGTERM) or its
terminal closes (SIGHUP), as on Ctrl-C: ``pool.end_on_term`` turns both into
KeyboardInterrupt so its ``finally`` runs (a SIGTERMed mode_cost left four SIGSTOPped
servers behind). The control: without it the finally never runs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import asyncio, sys
if sys.argv[2] == "on":
    from tests.real_sglang.rig.pool import end_on_term
    end_on_term()
try:
    print("ready", flush=True)
    asyncio.run(asyncio.sleep(60))  # the benchmarks wait inside asyncio.run
finally:
    open(sys.argv[1], "w").write("servers stopped")
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("on", [True, False])
def test_a_killed_benchmark_runs_its_finally(tmp_path, sig, on):
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(marker), "on" if on else "off"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    if on:
        assert marker.read_text() == "servers stopped"
    else:  # the control: the default action ends it before any finally
        assert not marker.exists() and proc.returncode == -sig
