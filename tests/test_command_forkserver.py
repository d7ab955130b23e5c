"""The fork server the tests run `specconsole` commands through (tests/support/command_forkserver.py)
gives what ``python -m console`` in a fresh interpreter gives: the same exit code, stdout
and stderr, the caller's environment and directory, a kill at the timeout, and exec'd runs
where a fork could not match; and it ends with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from server_control.host.ports import free_port
from tests.support import command_forkserver as forkserver

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_LOG = ROOT / "tests" / "logs" / "fixtures" / "server.log"


# Whatever PYTHONPATH this run has (a measuring harness may bring a startup hook), these
# commands are to be forked: the repository's own path, which the fork server honours.
FORKED = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(autouse=True)
def _forking(monkeypatch):
    """The fork server's own tests fork, whatever the run asks of the other tests."""
    monkeypatch.delenv("SPECCONSOLE_TEST_CLI", raising=False)


@pytest.fixture
def state_env(tmp_path):
    env = {**FORKED, "SPECCONSOLE_STATE_DIR": str(tmp_path / "state")}
    assert forkserver.why_execd(env) is None
    return env


def _closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def test_a_forked_command_says_what_an_execd_one_says(state_env):
    url = _closed_url()
    cases = [
        ["--help"],
        ["status", "--help"],
        ["statsu"],  # a usage error: argparse's words and 2
        ["threshold", "-3", "--url", url],  # refused before anything is sent
        ["threshold", "7", "--url", url, "--json"],  # unreachable, as JSON
        ["status", "--demo", "--json"],  # nothing running
        ["journal", "--json"],
        ["logs", str(FIXTURE_LOG), "-n", "3", "--json"],
    ]
    assert forkserver._get_server() is not None, "the fork server did not start"
    for args in cases:
        forked = forkserver.run(args, cwd=ROOT, env=state_env, timeout=60)
        execd = forkserver.exec_run(args, cwd=ROOT, env=state_env, timeout=60)
        assert (forked.returncode, forked.stdout, forked.stderr) == (execd.returncode, execd.stdout, execd.stderr), args
        assert forked.args == execd.args == [sys.executable, "-m", "console", *args]
    assert {c.returncode for c in (forkserver.run(a, cwd=ROOT, env=state_env) for a in cases)} >= {0, 1, 2}


def test_each_command_gets_the_callers_environment_and_directory(tmp_path):
    for name in ("one", "two"):
        env = {**FORKED, "SPECCONSOLE_STATE_DIR": str(tmp_path / name)}
        assert forkserver.why_execd(env) is None
        res = forkserver.run(["status", "--demo"], env=env, timeout=60)
        assert res.returncode == 1 and str(tmp_path / name / "demo") in res.stderr, res.stderr
        assert str(tmp_path / ("two" if name == "one" else "one")) not in res.stderr
    (tmp_path / "here.log").write_bytes(FIXTURE_LOG.read_bytes())
    here = forkserver.run(["logs", "here.log", "-n", "2"], cwd=tmp_path, env=FORKED, timeout=60)
    there = forkserver.run(["logs", str(FIXTURE_LOG), "-n", "2"], env=FORKED, timeout=60)
    assert here.returncode == 0 and here.stdout == there.stdout and here.stdout.strip(), here.stderr
    assert forkserver.run(["logs", "here.log"], cwd=ROOT, env=FORKED, timeout=60).returncode != 0  # not found from elsewhere


def test_a_command_past_its_timeout_is_killed_and_its_output_kept():
    server = forkserver._get_server()
    assert server is not None
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        forkserver.run(["logs", str(FIXTURE_LOG), "--follow"], env=FORKED, timeout=3)
    assert time.monotonic() - started < 20
    assert b"Dynamic speculation" in caught.value.stdout  # what it printed before the kill
    assert psutil.Process(server.proc.pid).children() == []  # reaped, nothing left running


def test_what_python_reads_at_its_start_makes_the_command_run_execd(tmp_path):
    """A PYTHONPATH with a startup hook, another locale, loader path or time zone: a fork would
    not see them."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nprint('sitecustomize ran', file=sys.stderr)\n")
    hooked = forkserver.run(["statsu"], env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}, timeout=60)
    assert "sitecustomize ran" in hooked.stderr and hooked.returncode == 2
    server = forkserver._get_server()
    assert server is not None
    assert forkserver._path_forkable({"PYTHONPATH": str(ROOT)}, server.origins)
    assert forkserver.why_execd({**FORKED, "PYTHONPATH": str(tmp_path)}) == "PYTHONPATH shadows or hooks"
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "psutil.py").write_text("")
    assert not forkserver._path_forkable({"PYTHONPATH": str(tmp_path / "shadow")}, server.origins)
    for read_at_start in ({"LC_ALL": "C"}, {"LD_LIBRARY_PATH": str(tmp_path)}, {"TZ": "Pacific/Auckland"}):
        assert forkserver.why_execd({**FORKED, **read_at_start}) == "PYTHON*, LD_*, locale or TZ differ"


def test_the_server_ends_with_the_process_that_started_it():
    script = textwrap.dedent(
        """
        import os, signal
        from tests.support import command_forkserver as forkserver
        assert forkserver.run(["--help"], env={**os.environ, "PYTHONPATH": os.getcwd()}).returncode == 0
        print(forkserver._get_server().proc.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no goodbye: only its sockets close
        """
    )
    caller = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert caller.returncode == -9, caller.stderr
    pid = int(caller.stdout.split()[0])
    deadline = time.monotonic() + 15
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"fork server {pid} outlived its caller"
        time.sleep(0.1)


def _until_it_catches(pid: int, sig: int, timeout_s: float = 30) -> None:
    """Until the process has a handler for ``sig`` (its SigCgt mask in /proc)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught & (1 << (sig - 1)):
            return
        time.sleep(0.02)
    raise AssertionError(f"{pid} never caught signal {sig}")


def test_a_forked_command_shows_its_own_command_line_and_dies_by_its_signal():
    """ps, and whoever finds a process by its command line (a supervisor is known by
    "supervise" in it), see the command, not the fork server; a signal ends it as it
    ends an exec'd one (the same exit status)."""
    server = forkserver._get_server()
    assert server is not None
    args = ["logs", str(FIXTURE_LOG), "--follow", "--kind", "decode"]
    done: list[subprocess.CompletedProcess] = []
    thread = threading.Thread(target=lambda: done.append(forkserver.run(args, env=FORKED, timeout=60)))
    thread.start()
    deadline = time.monotonic() + 30
    running: list[psutil.Process] = []
    while not running and time.monotonic() < deadline:  # retitled once forked
        running = [c for c in psutil.Process(server.proc.pid).children() if "logs" in c.cmdline()]
        time.sleep(0.05)
    assert running, "the command never showed its own command line"
    assert running[0].cmdline() == [sys.executable, "-m", "console", *args]
    _until_it_catches(running[0].pid, signal.SIGTERM)
    running[0].terminate()
    thread.join(30)
    execd = subprocess.Popen([sys.executable, "-m", "console", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _until_it_catches(execd.pid, signal.SIGTERM)
    execd.terminate()
    assert done and done[0].returncode == execd.wait(30) == 0, (done, execd.returncode)
    assert "Dynamic speculation" not in done[0].stdout  # --kind decode: only the decode lines
