"""Helpers of the trust tests (tests/trust/): the CLI as a real process, the processes that
serve a port, who listens on it, and a profile's port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.support import command_forkserver
from tests.support.sim import REPO_ROOT


def cli(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess:
    return command_forkserver.run(args, cwd=REPO_ROOT, timeout=timeout_s)


def run_pids(port: int) -> list[int]:
    """Every process whose command line serves ``port`` (the simulator's ranks included),
    but for those of another test: in a parallel run another worker's simulator may carry the
    same port number (a free port is free only until someone takes it). Another test's is one
    whose state directory lies outside this test's directory (the parent of its state
    directory: a test's second, "remote" state dir is its own); a process without one counts."""
    ours = os.environ.get("SPECCONSOLE_STATE_DIR")
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "--port" in cmd and str(port) in cmd and "server_control.sim" in " ".join(cmd):
            try:
                theirs = p.environ().get("SPECCONSOLE_STATE_DIR")
            except psutil.Error:
                continue  # gone, or not ours to read
            if ours is None or theirs is None or Path(theirs).is_relative_to(Path(ours).parent):
                out.append(p.pid)
    return out


def listeners(port: int) -> list[int]:
    return [
        c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.pid is not None and c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
    ]


def port_of(profile) -> int:
    return int(next(line.split("=")[1] for line in profile.read_text().splitlines() if line.startswith("port")))


def lookalike(port: int, cwd: str | Path | None = None, state_dir: str | None = None) -> subprocess.Popen:
    """A process (its own session) whose command line reads like a simulator on ``port``,
    started in ``cwd`` with ``state_dir``: another test's server, as a census sees it."""
    env = dict(os.environ)
    if state_dir is not None:
        env["SPECCONSOLE_STATE_DIR"] = state_dir
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", "-m", "server_control.sim", "--port", str(port)],
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while "server_control.sim" not in psutil.Process(proc.pid).cmdline() and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc
