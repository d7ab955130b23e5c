"""The keeper outlives a launcher killed right after the keeper wrote the record: its answer
goes to a pipe nobody reads (EPIPE), and it still copies the log and records the exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from server_control.proc.process import _keeper_env

SERVER = "import time; print('first', flush=True); time.sleep(1.0); print('last', flush=True)"


def test_the_keeper_goes_on_when_nobody_reads_its_answer(tmp_path):
    log_path, exit_file = tmp_path / "r.log", tmp_path / "r.exit"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    request = {
        "argv": [sys.executable, "-c", SERVER],
        "env": dict(os.environ),
        "cwd": str(tmp_path),
        "log_fd": log_fd,
        "log_path": str(log_path),
        "exit_file": str(exit_file),
    }
    rfd, wfd = os.pipe()
    os.close(rfd)  # the launcher is gone before the keeper answers
    try:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "server_control.keeper"],
            stdin=subprocess.PIPE,
            stdout=wfd,
            stderr=log_fd,
            pass_fds=(log_fd,),
            start_new_session=True,
            env=_keeper_env(),
        )
        keeper.communicate(json.dumps(request).encode(), timeout=30)
    finally:
        os.close(wfd)
        os.close(log_fd)
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        try:
            status = json.loads(exit_file.read_text())
        except (OSError, ValueError):
            status = None
        if status is not None and status.get("returncode") is not None:
            break
        time.sleep(0.1)
    assert status is not None and status["returncode"] == 0, (status, log_path.read_text())
    assert log_path.read_text().splitlines()[-2:] == ["first", "last"]
