"""`specconsole demo --fleet --keep`, `q` then Leave (issue 34 item 5): each of the four
simulated members keeps its own detached `specconsole supervise`, started with it (before:
a member's crash stayed down after the console left, and `q` then Stop still said "left
running"); a `kill -9` of a member's server is restarted by its supervisor. The
real command in real tmux, the real gateway; everything is ended by the pids and groups
the records name (tests/support/tmux.py)."""

from __future__ import annotations

import os
import signal
import sys

import psutil
import pytest

from server_control.state import runs
from tests.support.tmux import Term
from tests.support.wait import wait_for

# the demo fleet takes its shipped ports (30010-30014) when free: its tests share one worker
pytestmark = [pytest.mark.tmux, pytest.mark.timeout(300), pytest.mark.xdist_group("demo_fleet_ports")]


def _members(state) -> list[runs.RunRecord]:
    return [r for r in runs.list_records(state / "demo") if not r.name.endswith("-gateway")]


def _supervised(rec: runs.RunRecord) -> bool:
    who = rec.supervisor or {}
    return who.get("kind") == "run" and isinstance(who.get("pid"), int) and psutil.pid_exists(who["pid"])


def _launched(tmp_path, name: str) -> Term:
    """`demo --fleet --keep` in tmux, its exit code printed after it, launched."""
    t = Term(tmp_path, size=(150, 40))
    t.sock = f"specconsole-{name}-{os.getpid()}"
    t.start(f"{sys.executable} -m console demo --fleet --keep --time-scale 5 --no-mouse; echo EXIT=$?; sleep 120")
    t.wait(lambda s: "launch on 5: 5 ok" in s, timeout=120, what="the demo fleet launched")
    return t


def test_leave_leaves_each_member_with_its_supervisor_that_restarts_its_crash(tmp_path):
    t = _launched(tmp_path, "fleetkeep")
    try:
        t.keys("q")
        t.wait(lambda s: "Leave fleet running" in s, what="the quit question")
        t.keys("Enter")  # Leave (the default)
        out = t.wait(lambda s: "EXIT=" in s, timeout=60, what="the console's exit")
        assert "EXIT=0" in out and "left running" in out, out
        assert "4 of 4 local member(s) have their own supervisor" in out.replace("\n", ""), out
        members = wait_for(
            lambda: (m := _members(t.state)) and len(m) == 4 and all(map(_supervised, m)) and m, 30, what="4 supervisors"
        )
        victim = members[0]
        os.killpg(victim.pgid, signal.SIGKILL)  # the member's server crashes
        back = wait_for(
            lambda: (r := runs.load_record(victim.name, t.state / "demo")) and r.restarts >= 1 and r.is_live() and r,
            90,
            what="the crash restarted by the member's supervisor",
        )
        assert back.pid != victim.pid and back.port == victim.port  # on the port the gateway routes to
    finally:
        t.close()


def test_stop_with_keep_stops_everything_and_says_so(tmp_path):
    t = _launched(tmp_path, "fleetstop")
    try:
        pgids = [r.pgid for r in runs.list_records(t.state / "demo")]
        t.keys("q")
        t.wait(lambda s: "Stop fleet" in s, what="the quit question")
        t.keys("s")
        out = t.wait(lambda s: "EXIT=" in s, timeout=90, what="the console's exit")
        assert "EXIT=0" in out and "; stopped" in out and "left running" not in out, out  # before: "left running"
        assert "have their own supervisor" not in out
        assert len(pgids) == 5 and not any(r.is_live() for r in runs.list_records(t.state / "demo"))
    finally:
        t.close()
