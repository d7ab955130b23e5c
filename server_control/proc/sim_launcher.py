"""Start the simulator as a real process: its own session (its pid is the process group
id), a bounded lifetime (``--sim-max-lifetime``), stopped by that group, never by name.

    with start_sim(tp=2, threshold=5, log_path=tmp / "sim.log") as sim:
        sim.wait_ready()
        httpx.get(sim.url + "/health")

Used by `specconsole bench --sim`, the benchmarks and the tests (tests/support/sim.py adds
test defaults). Nothing here imports the SGLang patch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from server_control.host.ports import free_port
from server_control.net import tls
from server_control.net.lean_httpx import httpx

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding server_control
DEFAULT_LIFETIME_S = 600.0
MODEL = "sim/Llama-3.1-8B-Instruct"
DRAFT = "sim/EAGLE3-LLaMA3.1-Instruct-8B"


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


def sim_argv(
    port: int,
    *extra_args: str,
    tp: int = 2,
    threshold: int = 5,
    traffic: str = "idle",
    lifetime: float = DEFAULT_LIFETIME_S,
    time_scale: float = 1.0,
    seed: int = 0,
    host: str = "127.0.0.1",
) -> list[str]:
    """The simulator's command line: EAGLE-3 with dynamic speculation disable at ``threshold``."""
    argv = [
        sys.executable,
        "-m",
        "server_control.sim",
        "--model-path",
        MODEL,
        "--tp-size",
        str(tp),
        "--host",
        host,
        "--port",
        str(port),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        DRAFT,
        "--speculative-disable-batch-threshold",
        str(threshold),
        "--sim-traffic",
        traffic,
        "--sim-max-lifetime",
        str(lifetime),
        "--sim-time-scale",
        str(time_scale),
        "--sim-seed",
        str(seed),
    ]
    return argv + list(extra_args)


@dataclass
class SimProcess:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    pgid: int
    log_path: Path
    argv: list[str] = field(default_factory=list)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 60) -> SimProcess:
        """Poll /health until 200; raises with the log tail if the process dies or times out."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0, trust_env=False, verify=tls.shared()) as client:
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

    def group_pids(self) -> list[int]:
        return group_pids(self.pgid)

    def group_alive(self) -> bool:
        return bool(self.group_pids())

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL what is left after ``grace`` seconds."""
        if self.group_alive():
            self._signal_group(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not self.group_alive():
                break
            time.sleep(0.05)
        if self.group_alive():
            self._signal_group(signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 5
        while self.group_alive() and time.monotonic() < deadline:
            time.sleep(0.05)  # zombies of the group are reaped by init
        return self.proc.returncode

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_sim(
    *extra_args: str,
    port: int | None = None,
    log_path: str | os.PathLike[str] | None = None,
    env: dict[str, Any] | None = None,
    argv: list[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    **argv_options: Any,
) -> SimProcess:
    """Start the simulator (not waiting for ready). ``argv`` replaces the whole command;
    ``argv_options`` go to ``sim_argv`` (tp, threshold, traffic, lifetime, time_scale, seed)."""
    port = free_port() if port is None else port
    cmd = argv or sim_argv(port, *extra_args, **argv_options)
    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="specconsole-sim-")) / f"sim-{port}.log"
    log_path = Path(log_path)
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=str(cwd or PACKAGE_ROOT),
            start_new_session=True,
        )
    return SimProcess(url=f"http://127.0.0.1:{port}", port=port, proc=proc, pgid=proc.pid, log_path=log_path, argv=cmd)
