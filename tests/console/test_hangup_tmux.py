"""An SSH drop ends only the view (issue 34): after `tmux kill-session` (the terminal goes
away, the console gets SIGHUP) the run keeps the detached `specconsole supervise` it was
launched under (role `run`), the same process before and after; before, the supervision
lived in the console, had to be handed off, and once `status` said "supervisor: none". Real tmux, the real demo, the run record read from disk; everything
started is stopped by the pids and groups recorded (the simulator's group, the supervise)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import psutil
import pytest

from server_control.host.ports import free_port
from server_control.state import runs
from tests.support import command_forkserver
from tests.support.tmux import Term

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(240)]


def demo_status(t: Term) -> dict:
    r = command_forkserver.run(["status", "--demo", "--state-dir", str(t.state / "demo"), "--json"], env=t.env, timeout=60)
    return json.loads(r.stdout)


def test_kill_session_leaves_the_run_with_its_own_supervisor(tmp_path):
    t = Term(tmp_path)
    t.sock = f"specconsole-hup-{os.getpid()}"
    # a free port: the demo's own 30000 may be any other test's demo (or anyone's) in a parallel run
    t.start(f"{sys.executable} -m console demo --port {free_port()} --time-scale 5 --no-mouse")
    rec = sup_pid = None
    try:
        t.wait(lambda s: "READY" in s and "N=5" in s, what="READY and N=5")
        rec = runs.load_record("demo", t.state / "demo")
        assert rec is not None and rec.is_live()
        before = (rec.supervisor or {}).get("pid")
        assert (rec.supervisor or {}).get("kind") == "run" and before, rec.supervisor
        t.tmux("kill-session", "-t", "t", check=True)  # the terminal goes away: SIGHUP
        deadline = time.monotonic() + 45
        who = None
        while time.monotonic() < deadline:
            disk = runs.load_record("demo", t.state / "demo")
            who = disk.supervisor if disk is not None else None
            if who and who.get("kind") == "run":
                break
            time.sleep(0.3)
        assert who and who.get("kind") == "run", who  # before: no supervisor at all
        sup_pid = who["pid"]
        assert sup_pid == before  # nothing handed over: the same supervisor
        assert psutil.pid_exists(sup_pid) and rec.is_live()  # the server runs on, supervised
        st = demo_status(t)
        assert st["run"]["supervisor"]["pid"] == sup_pid and st["run"]["supervisor"]["kind"] == "run"
    finally:
        command_forkserver.run(["stop", "--demo", "--state-dir", str(t.state / "demo")], env=t.env, timeout=60)
        t.close()
        if sup_pid:
            try:
                os.kill(sup_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if rec is not None and rec.is_live():
            try:
                os.killpg(rec.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
