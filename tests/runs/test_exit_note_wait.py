"""The exit code of a server that died is read from its keeper's note; on a loaded machine
the keeper wrote it more than 2 s after the server died, and `launch --wait` said "exit code
unknown" for a server that exited with 2 (seen in a parallel test run at load ~8). While the
recorded keeper still runs, the note is waited for (up to ``KEEPER_NOTE_MAX_S``)."""

from __future__ import annotations

import json
import threading
import time

from server_control.proc import process


def _write_later(path, delay_s: float, pid: int, create_time: float) -> threading.Thread:
    def write() -> None:
        time.sleep(delay_s)
        path.write_text(json.dumps({"pid": pid, "create_time": create_time, "returncode": 2}))

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_a_late_note_is_waited_for_while_the_keeper_runs(tmp_path):
    note = tmp_path / "exit.json"
    note.write_text(json.dumps({"pid": 4242, "create_time": 100.0, "returncode": None}))  # the start note
    _write_later(note, 2.6, 4242, 100.0)
    t0 = time.monotonic()
    assert process.exit_status(note, 4242, 100.0, wait_s=0.5, keeper_runs=lambda: True) == 2
    assert time.monotonic() - t0 < process.KEEPER_NOTE_MAX_S


def test_without_a_running_keeper_it_gives_up_after_the_wait(tmp_path):
    note = tmp_path / "exit.json"
    note.write_text(json.dumps({"pid": 4242, "create_time": 100.0, "returncode": None}))
    _write_later(note, 2.6, 4242, 100.0)
    t0 = time.monotonic()
    assert process.exit_status(note, 4242, 100.0, wait_s=0.5, keeper_runs=lambda: False) is None
    assert time.monotonic() - t0 < 2.0
    assert process.exit_status(note, 4242, 100.0, wait_s=0.5) is None  # nobody says the keeper runs: as before


def test_a_run_found_dead_reads_the_exit_code_its_keeper_is_still_writing(tmp_path):
    """The same wait where a run is found on disk (found_run.reading: `launch --wait`
    adopting the run it launched): its server had died, its keeper had not written the
    note yet, and the run read "exited before ready: exit code unknown" for a server that
    exited with 2 (a 4-worker fast loop, tests/cli/test_runs.py)."""
    import os
    import subprocess

    import psutil

    from server_control.host.start_ticks import proc_start
    from server_control.supervision import found_run
    from tests.support.records import own_record

    server = subprocess.Popen(["sleep", "0.2"], start_new_session=True)
    created = psutil.Process(server.pid).create_time()
    server.wait()
    keeper = proc_start(os.getpid())  # this test process stands for the keeper: it runs
    rec = own_record(
        pid=server.pid,
        create_time=created,
        pgid=server.pid,
        sid=server.pid,
        argv=["sleep", "0.2"],
        boot_id=None,
        start_ticks=None,
        keeper_pid=os.getpid(),
        keeper_ticks=keeper.ticks,
    )
    note = tmp_path / "exit.json"
    note.write_text(json.dumps({"pid": server.pid, "create_time": created, "returncode": None}))
    _write_later(note, 0.5, server.pid, created)
    _state, facts = found_run.reading(rec, False, note, lambda: True, None)
    assert facts["exit_code"] == 2 and "exited before ready: exit code 2" in (facts["last_error"] or ""), facts
