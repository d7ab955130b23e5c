"""The trust tests' census of a run's processes (``run_pids``) counts this test's processes
only: in a parallel run another worker's simulator may carry the same port number."""

from __future__ import annotations

import os
import signal

from server_control.host.ports import free_port
from tests.support.trust import lookalike, run_pids


def test_a_lookalike_of_another_test_is_not_counted(state_dir, tmp_path, tmp_path_factory):
    port = free_port()
    ours, remote = lookalike(port, state_dir=str(state_dir)), lookalike(port, state_dir=str(tmp_path / "remote-state"))
    theirs = lookalike(port, state_dir=str(tmp_path_factory.mktemp("another-test") / "state"))
    try:
        assert run_pids(port) == sorted([ours.pid, remote.pid])
    finally:
        for proc in (ours, remote, theirs):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
