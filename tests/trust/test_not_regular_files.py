"""Files that are not regular files (trust round 4 item 9): ``--profile /dev/zero`` grew to
1.6 GB in 2 s, and a FIFO as the profile, the fleet file, the run record or the journal hung
``status`` and ``journal``. Each is refused in one line, at once; real processes."""

from __future__ import annotations

import os

import pytest

from server_control.state import journal, runs
from tests.support.trust import cli


@pytest.fixture
def private_state(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    monkeypatch.delenv("SPECCONSOLE_PROFILE", raising=False)
    return state


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_profile_that_is_not_a_regular_file_is_refused(tmp_path, private_state, kind):
    path = "/dev/zero" if kind == "dev-zero" else str(tmp_path / "p.toml")
    if kind == "fifo":
        os.mkfifo(path)
    res = cli("status", "--profile", path, timeout_s=30)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{path}: cannot read profile (not a regular file)" in res.stderr


def test_a_fleet_file_that_is_a_fifo_is_refused(tmp_path, private_state):
    path = tmp_path / "f.toml"
    os.mkfifo(path)
    res = cli("fleet", "status", "--fleet", str(path), timeout_s=30)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "not a regular file" in res.stderr


def test_a_fifo_as_the_run_record_or_the_journal_hangs_nothing(tmp_path, private_state):
    profile = tmp_path / "t.toml"
    profile.write_text('name = "t"\n[server]\nkind = "sim"\nport = 1\n')
    record = runs.record_path("t", private_state)
    record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(private_state, 0o700)
    os.mkfifo(record)
    res = cli("status", "--profile", str(profile), timeout_s=30)
    assert "not a regular file" in res.stdout + res.stderr, res.stdout + res.stderr
    jpath = journal.journal_path(private_state)
    jpath.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(jpath)
    res = cli("journal", timeout_s=30)
    assert res.returncode in (0, 1), res.stdout + res.stderr
