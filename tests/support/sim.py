"""Start the simulator as a real process for tests (own session, bounded lifetime).

    with start_sim(tmp_path, "--enable-metrics", tp=2, threshold=5) as sim:
        sim.wait_ready()
        httpx.get(sim.url + "/health")

The process runs in a new session (its pid is the process group id); stop() signals that
group: SIGTERM, then SIGKILL after a grace period. Nothing outlives ``--sim-max-lifetime``.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIFETIME_S = 600
DEFAULT_TIME_SCALE = 20.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group. Orphans re-parented to an init
    that does not reap leave zombies behind: those count as gone."""
    pids = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                pids.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return pids


def _group_alive(pgid: int) -> bool:
    return bool(group_pids(pgid))


@dataclass
class SimHandle:
    url: str
    port: int
    proc: subprocess.Popen
    pgid: int
    log_path: Path
    argv: list[str] = field(default_factory=list)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60) -> "SimHandle":
        """Poll /health until 200; raises with the log tail if the process dies or times out."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"simulator exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
                try:
                    if client.get(self.url + "/health").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise TimeoutError(f"simulator not ready after {timeout} s:\n{self.log_text()[-3000:]}")

    def wait_for_log(self, text: str, timeout: float = 60, count: int = 1) -> str:
        """Poll the log file until ``text`` occurs ``count`` times; returns the log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.log_text()
            if log.count(text) >= count:
                return log
            if self.proc.poll() is not None and not self.group_alive():
                raise RuntimeError(f"simulator exited ({self.proc.returncode}) before {text!r}:\n{log[-3000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"{text!r} not in the log after {timeout} s:\n{self.log_text()[-3000:]}")

    def group_alive(self) -> bool:
        return _group_alive(self.pgid)

    def group_pids(self) -> list[int]:
        return group_pids(self.pgid)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL what is left after ``grace`` seconds."""
        if self.group_alive():
            try:
                os.killpg(self.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not self.group_alive():
                break
            time.sleep(0.05)
        if self.group_alive():
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 5
        while self.group_alive() and time.monotonic() < deadline:
            time.sleep(0.05)  # zombies of the group are reaped by init
        return self.proc.returncode

    def __enter__(self) -> "SimHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def sim_argv(port: int, *extra_args: str, tp: int = 2, threshold: int = 5, traffic: str = "idle",
             lifetime: float = DEFAULT_LIFETIME_S, time_scale: float = DEFAULT_TIME_SCALE,
             seed: int = 0) -> list[str]:
    argv = [sys.executable, "-m", "server_control.sim", "--model-path", "sim/Llama-3.1-8B-Instruct",
            "--tp-size", str(tp), "--host", "127.0.0.1", "--port", str(port),
            "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "sim/EAGLE3-LLaMA3.1-Instruct-8B",
            "--speculative-disable-batch-threshold", str(threshold),
            "--sim-traffic", traffic, "--sim-max-lifetime", str(lifetime),
            "--sim-time-scale", str(time_scale), "--sim-seed", str(seed)]
    return argv + list(extra_args)


def start_sim(tmp_path, *extra_args: str, tp: int = 2, threshold: int = 5, traffic: str = "idle",
              env: dict | None = None, lifetime: float = DEFAULT_LIFETIME_S,
              time_scale: float = DEFAULT_TIME_SCALE, seed: int = 0, port: int | None = None,
              argv: list[str] | None = None) -> SimHandle:
    """Start the simulator (not waiting for ready). ``argv`` replaces the whole command."""
    port = free_port() if port is None else port
    cmd = argv or sim_argv(port, *extra_args, tp=tp, threshold=threshold, traffic=traffic,
                           lifetime=lifetime, time_scale=time_scale, seed=seed)
    log_path = Path(tmp_path) / f"sim-{port}.log"
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=full_env, cwd=str(REPO_ROOT), start_new_session=True)
    return SimHandle(url=f"http://127.0.0.1:{port}", port=port, proc=proc, pgid=proc.pid,
                     log_path=log_path, argv=cmd)
