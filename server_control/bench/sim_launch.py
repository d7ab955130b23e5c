"""Start a simulator for a benchmark: own session, bounded lifetime, stopped by its group."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SimProcess:
    def __init__(self, *extra: str, tp: int = 2, threshold: int = 5, time_scale: float = 1.0,
                 lifetime_s: float = 900, log_path: str | os.PathLike | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_path or f"/tmp/specconsole-sim-bench-{self.port}.log")
        argv = [sys.executable, "-m", "server_control.sim", "--model-path", "sim/Llama-3.1-8B-Instruct",
                "--tp-size", str(tp), "--host", "127.0.0.1", "--port", str(self.port),
                "--speculative-algorithm", "EAGLE3", "--speculative-disable-batch-threshold", str(threshold),
                "--sim-time-scale", str(time_scale), "--sim-max-lifetime", str(lifetime_s), *extra]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        self.pgid = self.proc.pid

    def wait_ready(self, timeout: float = 60.0) -> "SimProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"simulator exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"simulator not ready after {timeout} s; see {self.log_path}")

    def stop(self, grace: float = 10.0) -> None:
        try:
            os.killpg(self.pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=5)

    def __enter__(self) -> "SimProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
