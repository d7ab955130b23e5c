"""`specconsole journal` prints who changed what and how it went: launch, runtime changes
(old -> new, result), stop; each with user@host and pid; filtered by profile or URL."""

from __future__ import annotations

import getpass
import json
import os
import socket
from pathlib import Path

import pytest

from server_control.state import runs
from tests.support.cli import cli


def test_journal_lists_changes_and_lifecycle_with_who(make_profile, groups, state_dir):
    path = make_profile("jr", tp=1)
    assert cli("launch", "--profile", str(path), "--wait", "60").returncode == 0
    groups.add(runs.load_record("jr").pgid)
    assert cli("threshold", "8", "--profile", str(path)).returncode == 0
    assert cli("threshold", "--force", "target_only", "--profile", str(path)).returncode == 0
    bad = cli("threshold", "--", "-3", "--profile", str(path))
    assert bad.returncode == 2  # refused before anything is sent: not journaled
    assert cli("stop", "--profile", str(path)).returncode == 0

    text = cli("journal", "--profile", str(path))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    me = f"{getpass.getuser()}@{socket.gethostname()}"
    assert [ln.split("  ")[5] for ln in lines] == ["launch", "threshold", "force", "stop"], lines
    assert all(me in ln and " pid " in ln for ln in lines), lines
    assert "specconsole threshold  jr  threshold  5 -> 8  applied" in lines[1], lines[1]
    assert "force  auto -> target_only  applied" in lines[2] and "stop" in lines[3] and "done" in lines[3]

    entries = [json.loads(ln) for ln in cli("journal", "--profile", str(path), "--json", "--steps").stdout.splitlines()]
    steps = [e["result"] for e in entries if e["action"] == "threshold"]
    assert steps == ["pending", "read back", "applied"], steps
    url = entries[0]["target"]
    assert cli("journal", "--url", url, "-n", "1").stdout.count("\n") == 1
    none = cli("journal", "--url", "http://127.0.0.1:1")
    assert (none.returncode, none.stdout) == (0, ""), none
    assert none.stderr.startswith("specconsole: no journal entries for http://127.0.0.1:1 in "), none.stderr
    assert cli("journal", "-n", "0").returncode == 2


def _state_with_journal(tmp_path, monkeypatch, make) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    monkeypatch.delenv("SPECCONSOLE_PROFILE", raising=False)
    make(state / "journal.jsonl")
    return state / "journal.jsonl"


@pytest.mark.parametrize("make, why", [(os.mkfifo, "not a regular file"), (os.mkdir, "not a regular file")])
def test_a_journal_that_cannot_be_read_is_said_not_shown_empty(tmp_path, monkeypatch, make, why):
    """A FIFO or a directory where the journal belongs: one line naming the file and why,
    exit 1 (as `logs` for a file it cannot read), as text and --json; not an empty journal."""
    path = _state_with_journal(tmp_path, monkeypatch, make)
    for extra in ((), ("--json",)):
        res = cli("journal", *extra, timeout=30)
        assert res.returncode == 1, (extra, res.returncode, res.stderr)
        said = f"specconsole: cannot read the journal {path}: {why}"
        # with --json the same line on stdout as {"error", "exit"} (console/cli/json_failure.py)
        assert res.stdout == ("" if not extra else json.dumps({"error": said, "exit": 1}) + "\n"), res.stdout
        assert res.stderr.strip() == said, res.stderr
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(empty))
    res = cli("journal", timeout=30)
    said = f"specconsole: no journal entries in {empty / 'journal.jsonl'}\n"
    assert (res.returncode, res.stdout, res.stderr) == (0, "", said), "no journal yet is an empty journal, said, not an error"
    res = cli("journal", "--json", timeout=30)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", ""), "JSON lines: no entry is no line"
