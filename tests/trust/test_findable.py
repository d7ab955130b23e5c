"""A server this tool started is always findable (issue 22 item 1): the keeper writes the
run record before it answers the launcher, a lost or unreadable record is recovered from
the keeper's start note, and when even that is gone `stop` names what still listens
instead of saying "not running". Real launches of the simulator, real SIGKILLs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from server_control.state import runs
from tests.support.sim import REPO_ROOT
from tests.support.trust import cli, listeners, port_of, run_pids


def _kill_when_the_server_exists(launcher: subprocess.Popen, port: int, timeout_s: float = 60) -> None:
    """SIGKILL the launcher at the first moment its server process exists: the launcher is
    stopped (SIGSTOP) while each look is taken, so it cannot have gone further meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and launcher.poll() is None:
        launcher.send_signal(signal.SIGSTOP)
        if run_pids(port):
            launcher.send_signal(signal.SIGKILL)
            return
        launcher.send_signal(signal.SIGCONT)
        time.sleep(0.002)
    launcher.send_signal(signal.SIGKILL)


@pytest.mark.parametrize("when", ["server-appears", 0.4, 0.8])
def test_a_launcher_killed_at_any_moment_leaves_a_run_that_stop_finds(make_profile, state_dir, groups, when):
    profile = make_profile(name=f"k{str(when).replace('.', '').replace('-', '')[:8]}")
    port = port_of(profile)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "console", "launch", "--profile", str(profile)],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if when == "server-appears":
        _kill_when_the_server_exists(launcher, port)
    else:
        time.sleep(float(when))
        launcher.send_signal(signal.SIGKILL)
    launcher.wait(10)
    time.sleep(0.5)  # a keeper that got the request starts its server now
    before = run_pids(port)
    if when == "server-appears":
        assert before, "the launcher was killed once its server existed"
    res = cli("stop", "--profile", str(profile))
    deadline = time.monotonic() + 10
    while run_pids(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = run_pids(port)
    for pid in left:  # never leave them behind, even when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"server processes left after stop ({res.stdout.strip()}); before stop: {before}"
    assert res.returncode == 0, res.stdout + res.stderr
    if before:
        assert "stopped" in res.stdout, res.stdout


def _launched(profile, *extra: str) -> runs.RunRecord:
    res = cli("launch", "--profile", str(profile), "--wait", "60", *extra)
    assert res.returncode == 0, res.stdout + res.stderr
    rec = runs.load_record(profile.stem)
    assert rec is not None
    return rec


@contextlib.contextmanager
def _supervisor_held(rec: runs.RunRecord):
    """The run's own detached supervisor stopped (SIGSTOP, its recorded pid and start time
    checked) while a test damages the record. It writes the record once it has seen the run
    ready (who supervises, the health), and on a loaded machine that came after `launch
    --wait` returned and the test had truncated the record: `status` then read a whole one
    (a 5-worker fast loop). So: wait for that write, then hold it; continued after."""
    deadline = time.monotonic() + 30
    while not (rec.supervisor and rec.health == "ready") and time.monotonic() < deadline:
        time.sleep(0.05)
        rec = runs.load_record(rec.name) or rec
    sup = rec.supervisor or {}
    assert sup and rec.health == "ready", f"the run's supervisor never wrote the record: {rec}"
    proc = psutil.Process(sup["pid"])
    assert abs(proc.create_time() - float(sup["create_time"])) < 1.0, (sup, proc)
    # never held inside the record's lock: it takes it for every update (members, titles), and a
    # `stop` would then wait its 60 s for it (a fresh clone's run: "cannot take ... lost.op.lock")
    lock = runs.profile_lock(rec.name)
    for _ in range(200):
        proc.send_signal(signal.SIGSTOP)
        while proc.status() != psutil.STATUS_STOPPED:
            time.sleep(0.01)
        if not lock.is_held_elsewhere():
            break
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    else:
        raise AssertionError("the run's supervisor held the record's lock at every try")
    try:
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def test_a_truncated_record_is_recovered_from_the_keeper_note(make_profile, state_dir, groups):
    profile = make_profile(name="trunc")
    rec = _launched(profile)
    groups.add(rec.pgid)
    path = runs.record_path("trunc")
    with _supervisor_held(rec):
        path.write_text(path.read_text()[:40])
        status = cli("status", "--profile", str(profile))
    said = status.stdout + status.stderr
    assert f"pid {rec.pid}" in said and "keeper's note" in said and "moved aside" in said, said
    res = cli("stop", "--profile", str(profile))
    assert res.returncode == 0 and "stopped" in res.stdout, res.stdout + res.stderr
    assert not run_pids(rec.port)


def test_an_unreadable_record_without_a_note_names_what_listens(make_profile, state_dir, groups):
    profile = make_profile(name="lost")
    rec = _launched(profile)
    groups.add(rec.pgid)
    with _supervisor_held(rec):
        runs.record_path("lost").write_text("{")
        runs.exit_file("lost").unlink(missing_ok=True)
        res = cli("stop", "--profile", str(profile))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "NOT stopped" in res.stdout and f"still listening on port {rec.port}" in res.stdout
    assert f"pid {rec.pid}" in res.stdout, res.stdout
    assert listeners(rec.port), "it still serves: nothing was signalled without a verified identity"


@pytest.mark.parametrize("field,value", [("pid", -1), ("pid", 0), ("pgid", 0), ("sid", -7)])
def test_a_record_naming_an_impossible_process_is_recovered_from_the_keeper_note(make_profile, state_dir, groups, field, value):
    """``pid: -1`` raised ValueError in every command; ``pid: 0`` made ``stop`` SIGKILL the
    run's own children and say "stopped" while the leader still served. Such a record is
    unreadable like any other tampered one: moved aside, the run recovered from the note."""
    import json

    profile = make_profile(name=f"bad{field}{abs(value)}")
    rec = _launched(profile)
    groups.add(rec.pgid)
    path = runs.record_path(profile.stem)
    with _supervisor_held(rec):  # its own write of the ready run would undo the damage
        data = json.loads(path.read_text())
        data[field] = value
        path.write_text(json.dumps(data))
        status = cli("status", "--profile", str(profile))
    said = status.stdout + status.stderr
    assert "Traceback" not in said, said
    assert f"pid {rec.pid}" in said and "keeper's note" in said and "moved aside" in said, said
    res = cli("stop", "--profile", str(profile))
    assert res.returncode == 0 and "stopped" in res.stdout, res.stdout + res.stderr
    assert not run_pids(rec.port)


def test_a_run_seen_ready_by_launch_wait_reads_unhealthy_when_it_hangs_not_starting(make_profile, state_dir, groups):
    """``launch --wait`` saw the server ready but never wrote ``ready_at``: once the server
    hung, ``status`` of the unsupervised run said "starting". Launched ``--no-supervise``, as
    its subject is: a run's own supervisor would restart the hung server (its group gone by
    the SIGCONT when ``status`` is slow)."""
    profile = make_profile(name="hang")
    rec = _launched(profile, "--no-supervise")
    groups.add(rec.pgid)
    assert runs.load_record("hang").ready_at is not None
    os.killpg(rec.pgid, signal.SIGSTOP)
    try:
        res = cli("status", "--profile", str(profile), "--json")
    finally:
        os.killpg(rec.pgid, signal.SIGCONT)
    import json

    state = json.loads(res.stdout)["run"]["state"]
    assert state != "starting", res.stdout
    assert cli("stop", "--profile", str(profile)).returncode == 0
