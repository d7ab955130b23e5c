"""The state dir on a full filesystem (a 2 MB tmpfs mounted by the test, filled to the last
byte; skipped with the reason where the machine cannot mount one): `stop` signals first
and reports the record error, `supervise` keeps supervising (FATAL with the reason, no
process left), `threshold` says "applied now, NOT kept across a restart" (exit 1), and a
launch whose record cannot be written starts no server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from server_control.state import runs
from tests.support.sim import REPO_ROOT
from tests.support.trust import cli, port_of, run_pids
from tests.trust.conftest import fill


@pytest.fixture
def full_state(full_fs, monkeypatch):
    """The state dir on the small tmpfs (filled by the test when it wants)."""
    d = full_fs / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(d))
    return d


def _cleanup(port: int) -> list[int]:
    left = run_pids(port)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _running(pid: int, create_time: float) -> bool:
    """That process still runs (a zombie left for an init that does not reap has ended)."""
    try:
        p = psutil.Process(pid)
        return p.create_time() == create_time and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_stop_on_a_full_disk_signals_first_and_says_what_it_could_not_write(make_profile, full_state, full_fs):
    profile = make_profile(name="fd")
    port = port_of(profile)
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    fill(full_fs)
    res = cli("stop", "--profile", str(profile))
    left = _cleanup(port)
    assert not left, f"stop on a full disk left {left}: {res.stdout} {res.stderr}"
    assert res.returncode == 0, res.stdout + res.stderr
    assert "could not mark the record stopping" in res.stdout and "No space left" in res.stdout, res.stdout
    assert "Traceback" not in res.stderr


def test_threshold_on_a_full_disk_says_not_kept(make_profile, full_state, full_fs):
    profile = make_profile(name="ft")
    port = port_of(profile)
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        fill(full_fs)
        res = cli("threshold", "9", "--profile", str(profile))
        assert res.returncode == 1, res.stdout + res.stderr
        assert "applied now, NOT kept across a restart" in res.stdout, res.stdout
        assert "No space left" in res.stdout
        assert "threshold=9 read back" in res.stdout  # it IS applied now
        os.unlink(full_fs / "filler")
        assert runs.load_record("ft").runtime == {}, "what the record says: not kept"
        res = cli("stop", "--profile", str(profile))
        assert res.returncode == 0
    finally:
        assert not _cleanup(port)


def test_supervise_on_a_full_disk_keeps_supervising(make_profile, full_state, full_fs):
    """A crash on the full disk: `supervise` restarts it (the dead run's record makes room
    for the new one) or ends FATAL with the reason; it never dies of the OSError."""
    profile = make_profile(name="fs", burst=3, backoff=0.2)
    port = port_of(profile)
    sup = subprocess.Popen(
        [sys.executable, "-m", "console", "supervise", "--profile", str(profile)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(sup.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        rec = None
        while time.monotonic() < deadline and (rec is None or not rec.health):
            time.sleep(0.2)
            rec = runs.load_record("fs")
        assert rec is not None and rec.health == "ready"
        leader = psutil.Process(rec.pid)
        ranks = [(p.pid, p.create_time()) for p in leader.children(recursive=True)]
        assert ranks, "the simulator's ranks"
        fill(full_fs)
        os.kill(rec.pid, signal.SIGKILL)  # a crash on the full disk: its ranks are orphaned
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and sup.poll() is None
            and not any(("ready" in line and "restarts 1" in line) or "fatal" in line for line in list(lines))
        ):
            time.sleep(0.2)
        out = "".join(lines)
        assert "Traceback" not in out, out[-3000:]
        # the crashed run's orphans were stopped before the restart (or the FATAL): the record on
        # the full disk may never have got them, the supervisor saw them while the leader ran
        orphans = [pid for pid, ct in ranks if _running(pid, ct)]
        assert not orphans, f"the crashed run's orphaned ranks still run: {orphans}; {out[-2000:]}"
        if any("fatal" in line for line in lines):
            assert "No space left on device" in out, out[-3000:]
        else:
            assert sup.poll() is None, f"supervise ended after the crash on a full disk: {out[-3000:]}"
            assert any("ready" in line and "restarts 1" in line for line in lines), out[-3000:]
        sup.send_signal(signal.SIGTERM)
        sup.wait(30)
        reader.join(10)
        assert "Traceback" not in "".join(lines)
        res = cli("stop", "--profile", str(profile))
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGKILL)
            sup.wait()
        left = _cleanup(port)
    assert not left, f"processes of the run left behind: {left}"


def test_launch_on_a_full_disk_starts_no_server(make_profile, full_state, full_fs):
    profile = make_profile(name="fl")
    runs.runs_dir()  # the state dir exists; then nothing more fits
    fill(full_fs)
    res = cli("launch", "--profile", str(profile))
    time.sleep(0.5)
    left = _cleanup(port_of(profile))
    assert not left, f"a server runs without a record: {left}"
    assert res.returncode == 1, res.stdout + res.stderr
    assert "cannot write the run record" in res.stdout + res.stderr and "No space left" in res.stdout + res.stderr


def test_a_record_that_cannot_be_written_is_said_once_in_a_while(state_dir, monkeypatch, caplog):
    """supervise on a full disk repeated 'run record ... not updated' four times a second."""
    import errno
    import logging

    from server_control.state import runs
    from tests.support.records import own_record

    runs.save_record(own_record())
    rec = runs.load_record("r")

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runs, "_update", full)
    with caplog.at_level(logging.WARNING, logger=runs.log.name):
        for _ in range(40):  # ten seconds of a supervisor's retries
            assert runs.try_update_record("r", None, rec.pid, lambda r: None) is None
    said = [r for r in caplog.records if "not updated" in r.getMessage()]
    assert len(said) == 1 and "No space left on device" in said[0].getMessage()
