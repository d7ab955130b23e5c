"""Start the stand-in servers of stock_server.py as real processes, in their own process
group, with a bounded lifetime, stopped by that group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from server_control.host.ports import free_port

HERE = Path(__file__).parent


class Stand:
    def __init__(self, proc: subprocess.Popen, port: int, log_path: Path):
        self.proc, self.port, self.log_path = proc, port, log_path
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start_stand(tmp_path: Path, mode: str, port: int | None = None) -> Stand:
    port = port or free_port()
    log_path = tmp_path / f"{mode}-{port}.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "stock_server.py"), "--port", str(port), "--mode", mode, "--max-lifetime", "120"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    stand = Stand(proc, port, log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(stand.url + "/ping", timeout=1.0)  # any answer (404) means it listens
            return stand
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise RuntimeError(f"stand-in server exited: {log_path.read_text()}") from None
            time.sleep(0.1)
    stand.stop()
    raise RuntimeError("stand-in server did not start within 30 s")


@pytest.fixture
def stand(tmp_path):
    started: list[Stand] = []

    def make(mode: str, port: int | None = None) -> Stand:
        s = start_stand(tmp_path, mode, port)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()
