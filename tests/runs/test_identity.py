"""A run's identity is its recorded leader (pid + start time + command line): forged or
stale records that point at somebody else's process never get it signalled.

The tests run as whatever user runs pytest (root in CI and here), so no permission check
stands between a wrong decision and a dead stranger: the only protection is the identity.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from server_control.host import identity
from server_control.state import runs
from tests.support.cli import cli
from tests.support.wait import wait_for


def stranger(groups, *, double_fork: bool = False) -> tuple[int, psutil.Process]:
    """A process somebody else runs, leading its own group and session (``setsid sleep``).
    With ``double_fork`` the session leader exits and leaves its child behind, as a classic
    daemon does: (the dead leader's pid, the live child)."""
    if not double_fork:
        p = subprocess.Popen(["sleep", "120"], start_new_session=True)
        groups.add(p.pid)
        return p.pid, psutil.Process(p.pid)
    code = (
        "import os, subprocess, sys; os.setsid(); "
        "c = subprocess.Popen(['sleep', '120'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(os.getpid(), c.pid, flush=True)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    leader, child = map(int, out.stdout.split())
    groups.add(leader)  # the group outlives its leader: the finalizer kills it by that id
    return leader, psutil.Process(child)


def forge(name: str, pid: int, port: int, create_time: float, argv: list[str] | None = None) -> None:
    argv = argv or [
        sys.executable,
        "-m",
        "server_control.sim",
        "--model-path",
        "test/model",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    runs.save_record(
        runs.RunRecord(
            name=name,
            profile_path=None,
            kind="sim",
            pid=pid,
            create_time=create_time,
            pgid=pid,
            sid=pid,
            argv=argv,
            host="127.0.0.1",
            port=port,
            log_path="/nonexistent/forged.log",
            cwd="/",
            started_at=runs.iso_time(create_time),
        )
    )


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


CASES = {
    # the recorded server died; its pid now belongs to a process that leads its own group
    "reused pid": dict(double_fork=False, shift=-30.0),
    # the recorded leader is gone; a daemon's orphaned child sits in a group of that number
    "group without its leader": dict(double_fork=True, shift=-30.0),
    # pid and start time match (forged), the command line is not the server's
    "same start time, other command": dict(double_fork=False, shift=0.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_forged_record_never_signals_a_stranger(case, make_profile, groups, state_dir):
    spec = CASES[case]
    path = make_profile("forged", tp=1)
    port = int(path.read_text().split("port = ")[1].split()[0])
    pid, victim = stranger(groups, double_fork=spec["double_fork"])
    forge("forged", pid, port, victim.create_time() + spec["shift"])

    stopped = cli("stop", "--profile", str(path), "--grace", "1", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert '"was_running": false' in stopped.stdout, stopped.stdout
    assert alive(victim), f"{case}: stop signalled pid {victim.pid}, which is not the server"

    forge("forged", pid, port, victim.create_time() + spec["shift"])
    launched = cli("launch", "--profile", str(path), "--json")
    assert launched.returncode == 0, launched.stderr
    rec = runs.load_record("forged")
    groups.add(rec.pgid)
    assert rec.pid != pid
    time.sleep(0.5)  # a late kill would land here
    assert alive(victim), f"{case}: launch killed pid {victim.pid}, which is not the server"
    assert cli("stop", "--profile", str(path)).returncode == 0
    assert alive(victim)
    wait_for(lambda: runs.load_record("forged") is None, what="the record removed")


@pytest.mark.parametrize(
    ("actual", "recorded", "matches"),
    [
        # `python -m pytest` with no arguments (how CI runs the suite): equal lines match
        (["py", "-m", "pytest"], ["py", "-m", "pytest"], True),
        (["py", "-m", "pytest"], ["py", "-m", "other"], False),
        (["py", "-m", "pytest", "x"], ["py", "-m", "pytest"], False),
        (["py", "-m", "srv", "--key", "s3cret"], ["py", "-m", "srv", "--key", "****"], True),
        # recorded arguments end the actual line (re-exec as another module, a wrapper in front)
        (["timeout", "9", "py", "-m", "sglang.launch_server", "--port", "1"], ["py", "-m", "serve", "--port", "1"], True),
        (["py", "-m", "srv", "--port", "2"], ["py", "-m", "srv", "--port", "1"], False),
    ],
)
def test_command_line_match(actual, recorded, matches):
    assert identity.cmdline_matches(actual, recorded) is matches


def test_a_record_written_inside_a_container_loads(state_dir):
    """In a pid namespace whose session leader lives outside it (a container, CI's machine),
    ``os.getsid`` answers 0: every record written there was refused as "sid must be a process
    id" and every command that read it failed."""
    from tests.support.records import own_record

    rec = own_record(sid=0)
    runs.save_record(rec)
    assert runs.load_record("r") == rec


def test_a_group_and_session_outside_the_namespace_take_in_no_strangers(groups, monkeypatch):
    """Where the leader's group and session ids read 0 (their leaders outside this pid
    namespace), every process of the container shares them: the identity walk must not take
    a later stranger in as a process of the run (``stop`` would signal it)."""
    leader_pid, leader = stranger(groups)
    time.sleep(0.05)  # the stranger starts after the leader: only the start-time test is left
    _, other = stranger(groups)
    monkeypatch.setattr(identity.os, "getpgid", lambda pid: 0)
    monkeypatch.setattr(identity.os, "getsid", lambda pid: 0)
    found: dict[int, psutil.Process] = {}
    identity._add_group_and_session(leader, found)
    assert other.pid not in found and leader_pid not in found, sorted(found)
