"""The trust tests' census of a run's processes (``run_pids``) counts this test's processes
only: in a parallel run another worker's simulator may carry the same port number."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from server_control.host.ports import free_port
from tests.support.trust import run_pids


def _lookalike(port: int, state_dir: str) -> subprocess.Popen:
    """A process whose command line reads like a simulator on ``port``, run with ``state_dir``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m", "server_control.sim", "--port", str(port)],
        env={**os.environ, "SPECCONSOLE_STATE_DIR": state_dir},
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while "server_control.sim" not in psutil.Process(proc.pid).cmdline() and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


def test_a_lookalike_of_another_test_is_not_counted(state_dir, tmp_path, tmp_path_factory):
    port = free_port()
    ours, remote = _lookalike(port, str(state_dir)), _lookalike(port, str(tmp_path / "remote-state"))
    theirs = _lookalike(port, str(tmp_path_factory.mktemp("another-test") / "state"))
    try:
        assert run_pids(port) == sorted([ours.pid, remote.pid])
    finally:
        for proc in (ours, remote, theirs):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
