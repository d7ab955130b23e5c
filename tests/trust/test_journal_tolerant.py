"""The operator journal is read tolerantly and never decides whether a change is kept
(issue 22 item 5), and a "pending" step left by a killed client is not waited for (item 12)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from server_control.control.guard import SettingGuard
from server_control.control.settings import Control
from server_control.state import journal, runs
from tests.support.trust import cli, port_of, run_pids

BAD_LINES = [
    '{"time": "yesterday", "user": "x", "host": "h", "pid": 1, "program": "p", "action": "threshold"}',
    '{"time": 1e999, "pid": "one"}',
    "not json at all",
    "[1, 2]",
    '{"time": 5, "user": 7, "host": "h", "pid": 1, "program": "p", "action": "threshold"}',
]


def test_bad_journal_lines_are_skipped_counted_and_decide_nothing(make_profile, state_dir, groups):
    profile = make_profile(name="jr")
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        path = journal.journal_path()
        with open(path, "a") as f:
            f.write("\n".join(BAD_LINES) + "\n")
        res = cli("threshold", "8", "--profile", str(profile))
        assert res.returncode == 0 and res.stdout.startswith("applied"), res.stdout + res.stderr
        assert "Traceback" not in res.stderr
        assert runs.load_record("jr").runtime == {"speculative_disable_batch_threshold": 8}, "kept for a restart"
        res = cli("journal")
        assert res.returncode == 0, res.stderr
        assert f"{len(BAD_LINES)} unreadable line(s) skipped" in res.stderr
        assert "threshold" in res.stdout and "applied" in res.stdout
    finally:
        assert cli("stop", "--profile", str(profile)).returncode == 0
        assert not run_pids(port_of(profile))


def test_a_pending_step_of_a_killed_client_is_not_in_flight(state_dir):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    url = "http://127.0.0.1:9"
    guard = SettingGuard(Control(url), url, state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    with open(journal.journal_path(state_dir), "a") as f:
        for pid, op in ((dead.pid, "deadop"), (os.getpid(), "liveop")):
            f.write(
                json.dumps(
                    {
                        "time": now,
                        "user": "u",
                        "host": socket.gethostname(),
                        "pid": pid,
                        "program": "specconsole threshold",
                        "action": "threshold",
                        "target": url,
                        "key": "speculative_disable_batch_threshold",
                        "new": 7,
                        "result": "pending",
                        "op": op,
                    }
                )
                + "\n"
            )
    ops = guard._others("speculative_disable_batch_threshold", "mine", now - 5)
    assert set(ops) == {"deadop", "liveop"}
    assert not guard._in_flight(ops["deadop"]), "its writer is gone: never finishes"
    assert guard._in_flight(ops["liveop"]), "a live writer's change is waited for"


def test_an_entry_after_a_torn_last_line_is_not_glued_onto_it(tmp_path):
    """A writer killed mid-line leaves the journal without its last newline: the next entry
    used to be appended to that line, and both were lost as one bad line."""
    from server_control.state import journal

    journal.record(tmp_path, "threshold", target="http://127.0.0.1:1", key="k", old=1, new=2, result="applied")
    path = journal.journal_path(tmp_path)
    with open(path, "ab") as f:
        f.write(b'{"time": 1, "user": "x", "act')  # torn
    journal.record(tmp_path, "threshold", target="http://127.0.0.1:1", key="k", old=2, new=3, result="applied")
    found = journal.read_counted(tmp_path)
    assert [(e.old, e.new) for e in found.entries] == [(1, 2), (2, 3)] and found.skipped == 1 and found.unreadable is None


def test_a_fifo_as_the_journal_does_not_hang_a_write(tmp_path):
    import os

    from server_control.state import journal

    path = journal.journal_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    assert journal.record(tmp_path, "threshold", target="http://127.0.0.1:1") is None  # refused, said, not hung
