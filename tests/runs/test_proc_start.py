"""A process's clock-free start (boot id + start ticks from /proc) and how identity uses it:
the same ticks in the same boot is the same process whatever the wall clock did; other
ticks (a reused PID) or another boot is not, even where the epoch start time agrees."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import uuid

import psutil
import pytest

from server_control.host import identity, start_ticks
from server_control.host.identity import RunIdentity
from server_control.state import runs
from tests.support.clock import EPOCH_START, step_wall_clock
from tests.support.records import own_record
from tests.support.wait import wait_for

CLK_TCK = os.sysconf("SC_CLK_TCK")
ODD_NAME = "a) b (c d"  # a command name with spaces and parentheses


@pytest.fixture
def child():
    """A child of ours (bounded life) that renamed itself to ``ODD_NAME``."""
    code = f"open('/proc/self/comm', 'w').write({ODD_NAME!r}); import time; time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_for(lambda: psutil.Process(p.pid).name() == ODD_NAME, what="the child renamed")
        yield psutil.Process(p.pid)
    finally:
        p.kill()
        p.wait()


def test_start_ticks_and_boot_id_from_proc(child):
    ticks = start_ticks.start_ticks(child.pid)
    # psutil's epoch start is exactly ticks / CLK_TCK + btime (its boot_time)
    assert ticks / CLK_TCK == pytest.approx(child.create_time() - psutil.boot_time(), abs=1e-6)
    with open(f"/proc/{child.pid}/stat") as f:  # splitting at spaces would read another field
        assert int(f.read().split()[21]) != ticks
    assert re.fullmatch(r"[0-9a-f-]{36}", start_ticks.boot_id())
    assert start_ticks.proc_start(child.pid) == start_ticks.ProcStart(start_ticks.boot_id(), ticks)
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert start_ticks.start_ticks(gone.pid) is None and start_ticks.proc_start(gone.pid) is None
    assert start_ticks.recorded(None, None) is None and start_ticks.recorded("b", True) is None


def test_record_matched_by_ticks_and_boot_not_by_the_wall_clock(state_dir, monkeypatch):
    me = psutil.Process()
    start = start_ticks.proc_start(me.pid)
    rec = own_record()  # with its start ticks, as records are written now
    runs.save_record(rec)
    assert runs.load_record("r") == rec and rec.identity().start == start
    for step in (1.0, -1.0, 3600.0, -86400.0):
        step_wall_clock(monkeypatch, step)
        assert rec.is_live(), f"{step:+g} s"
        assert not dataclasses.replace(rec, start_ticks=start.ticks - 1).is_live()  # a reused PID
        assert not dataclasses.replace(rec, boot_id=str(uuid.uuid4())).is_live()  # another boot
        # the epoch start time agrees exactly, the ticks do not: not the same process
        assert not dataclasses.replace(rec, start_ticks=start.ticks + 1, create_time=EPOCH_START(me)).is_live()


def test_earlier_versions_record_matched_by_epoch_within_the_tolerance(state_dir, monkeypatch):
    legacy = own_record(boot_id=None, start_ticks=None)  # as an earlier version wrote it
    assert legacy.identity().start is None
    for step, live in ((1.0, True), (-1.0, True), (identity.LEGACY_TOLERANCE_S + 0.5, False), (-100.0, False)):
        step_wall_clock(monkeypatch, step)
        assert legacy.is_live() is live, f"{step:+g} s"


def test_members_found_by_ticks_in_the_leaders_boot(child, monkeypatch):
    gone = subprocess.Popen(["true"])  # the leader: dead, so only members identify the run
    gone.wait()
    start = start_ticks.proc_start(child.pid)
    ident = RunIdentity(
        gone.pid,
        0.0,
        ("x",),
        members=((child.pid, EPOCH_START(child), start.ticks),),
        start=start_ticks.ProcStart(start.boot_id, 1),
    )
    step_wall_clock(monkeypatch, 3600.0)
    assert [p.pid for p in identity.run_processes(ident)] == [child.pid]
    wrong_ticks = dataclasses.replace(ident, members=((child.pid, EPOCH_START(child), start.ticks + 1),))
    other_boot = dataclasses.replace(ident, start=start_ticks.ProcStart(str(uuid.uuid4()), 1))
    assert identity.run_processes(wrong_ticks) == [] and identity.run_processes(other_boot) == []
    # an earlier version's member: [pid, epoch start] only, within the tolerance
    legacy = dataclasses.replace(ident, members=((child.pid, EPOCH_START(child), None),))
    assert identity.run_processes(legacy) == []  # 3600 s off
    step_wall_clock(monkeypatch, 1.0)
    assert [p.pid for p in identity.run_processes(legacy)] == [child.pid]


def test_bad_start_fields_are_reported(state_dir):
    path = runs.record_path("bad")
    for change, msg in (
        (dict(start_ticks="12"), "start_ticks must be an integer"),
        (dict(boot_id=7), "boot_id must be a string"),
        (dict(members=[[1, 2.0, "x"]]), "members must be"),
    ):
        path.write_text(own_record(**change).to_json())
        with pytest.raises(runs.RunRecordError, match=msg):
            runs.load_record("bad")
