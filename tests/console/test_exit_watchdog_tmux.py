"""A console whose terminal is gone ends within seconds, whatever Textual does (issue 34
item 3): with Textual's output stuck on the dead terminal (tests/support/stuck_terminal.py:
the writer thread never returns, so ``WriterThread.stop()`` waits for ever, Textual issue
#6692), `tmux kill-session` used to leave the console hung as an orphan. The exit watchdog
ends the process; the run keeps its own detached supervisor (issue 34: it never lived in
the console). The negative control runs the same console with the watchdog off: still hung
after 8 s. Real tmux, the real demo simulator; everything started
is ended by the pids and groups recorded."""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil
import pytest

from server_control.host.ports import free_port
from server_control.state import runs
from tests.support.tmux import REPO, Term

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(240)]
HUNG_FOR_S = 8.0  # the negative control: still there this long after the hang-up
GONE_WITHIN_S = 10.0  # generous for CI; the watchdog's own grace is 1.5 s (measured: python -m benchmarks.hangup_cycles)


def _supervisor_pid(state) -> int | None:
    rec = runs.load_record("demo", state / "demo")
    who = rec.supervisor if rec is not None else None
    return who["pid"] if who and who.get("kind") == "run" else None


@pytest.mark.parametrize("watchdog", [True, False], ids=["watchdog", "no-watchdog-negative-control"])
def test_a_console_stuck_on_a_dead_terminal_ends(tmp_path, watchdog):
    t = Term(tmp_path)
    t.sock = f"specconsole-wd-{os.getpid()}-{int(watchdog)}"
    flag = "" if watchdog else "--no-watchdog "
    argv = f"{flag}demo --time-scale 5 --no-mouse --port {free_port()}"  # a free port: other tests run demos too
    t.start(f"exec {sys.executable} {REPO / 'tests/support/stuck_terminal.py'} {argv}")
    console = None
    try:
        t.wait(lambda s: "READY" in s and "N=5" in s, what="READY and N=5")
        pane = t.tmux("display-message", "-p", "-t", "t", "#{pane_pid}", capture_output=True, text=True).stdout
        console = psutil.Process(int(pane.strip()))
        assert "stuck_terminal.py" in " ".join(console.cmdline())
        t.tmux("kill-session", "-t", "t", check=True)  # the terminal goes away: SIGHUP
        hung_up = time.monotonic()
        if watchdog:
            console.wait(timeout=GONE_WITHIN_S)  # raises psutil.TimeoutExpired while it hangs
            gone_s = time.monotonic() - hung_up
            assert gone_s < GONE_WITHIN_S
            sup = _supervisor_pid(t.state)
            assert sup is not None and psutil.pid_exists(sup), f"the run lost its supervisor ({gone_s:.1f} s to exit)"
            assert runs.load_record("demo", t.state / "demo").is_live()  # the server runs on, supervised
        else:
            time.sleep(HUNG_FOR_S)
            assert console.is_running() and console.status() != psutil.STATUS_ZOMBIE  # the hang, as it was
    finally:
        if console is not None and console.is_running():
            console.send_signal(signal.SIGKILL)
        t.close()
