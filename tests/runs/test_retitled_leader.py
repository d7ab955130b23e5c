"""A leader that retitles itself after the run is ready (smg's ``smg::router``) is still
recognised by another console: the console that verified it records the new title within
a poll, not only at its next full check ``RESCAN_S`` later (a second console's ``adopt`` of a
fleet's gateway found no live run in a 6-worker fast loop). Real processes: a leader that
takes its new title on SIGUSR1, a record on disk, two ``RunProcesses`` (two consoles)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from server_control.host.start_ticks import proc_start
from server_control.model.vocabulary import RunState
from server_control.state import runs
from server_control.supervision.run_processes import RESCAN_S, RunProcesses
from tests.support.records import own_record

pytest.importorskip("setproctitle", reason="the stand-in leader retitles itself with setproctitle")

TITLE = "smg::router"
LEADER = (
    "import signal, time, setproctitle\n"
    f"signal.signal(signal.SIGUSR1, lambda *a: setproctitle.setproctitle({TITLE!r}))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_title_taken_after_ready_is_recorded_for_the_next_console(tmp_path):
    argv = [sys.executable, "-c", LEADER]
    leader = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == "ready"
        start = proc_start(leader.pid)
        rec = own_record(
            name="gw",
            pid=leader.pid,
            create_time=psutil.Process(leader.pid).create_time(),
            boot_id=start.boot_id,
            start_ticks=start.ticks,
            pgid=leader.pid,
            sid=leader.pid,
            argv=argv,
        )
        runs.save_record(rec, tmp_path)
        sup = SimpleNamespace(profile=SimpleNamespace(name="gw"), state_dir=tmp_path, record=rec, state=RunState.READY)
        first = RunProcesses(sup)  # type: ignore[arg-type]
        first.launched(rec.pid, rec.create_time)
        assert first.live(rec)  # verified in full, by its launched command line: watched by pidfd now
        os.kill(leader.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while " ".join(psutil.Process(leader.pid).cmdline()).strip() != TITLE:  # the whole rewrite done
            assert time.monotonic() < deadline, "the leader never took its title"
            time.sleep(0.02)
        t0 = time.monotonic()
        assert first.live(rec)
        assert time.monotonic() - t0 < RESCAN_S  # the check above did not wait the rescan out
        other = RunProcesses(SimpleNamespace(profile=sup.profile, state_dir=tmp_path, record=None, state=RunState.STARTING))  # type: ignore[arg-type]
        disk = runs.load_record("gw", tmp_path)
        assert disk is not None and [t.strip() for t in disk.titles] == [TITLE], disk  # setproctitle pads with NULs
        assert other.live(disk)  # a console that never saw the leader before knows it by its title
    finally:
        leader.kill()
        leader.wait()
