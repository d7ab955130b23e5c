"""Fixtures of the fault and hostile-input tests: the run fixtures, a hostile HTTP server
(tests/support/hostile_http.py) as a real process, and a small full filesystem."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_control.host.ports import free_port
from tests.runs.conftest import groups, make_profile, state_dir  # noqa: F401 (fixtures)

HOSTILE = Path(__file__).resolve().parent.parent / "support" / "hostile_http.py"


@pytest.fixture
def hostile(tmp_path):
    """``start(mode)`` -> URL of a hostile server (stopped by its process group at teardown)."""
    procs: list[subprocess.Popen] = []

    def start(mode: str) -> str:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, str(HOSTILE), "--port", str(port), "--mode", mode, "--lifetime", "90"],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("the hostile server did not listen")

    yield start
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def mount_tmpfs(path: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``path``; None on success, else why not (a skip reason)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CAP_SYS_ADMIN)"
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], capture_output=True, text=True
    )
    return None if res.returncode == 0 else f"cannot mount a tmpfs here: {res.stderr.strip()}"


def fill(path: Path) -> None:
    """Fill the filesystem of ``path`` to the last byte (it may be full already)."""
    try:
        with open(path / "filler", "ab") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass
    probe = path / "probe"
    try:
        with open(probe, "wb") as f:
            f.write(b"x" * 8192)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        return
    finally:
        probe.unlink(missing_ok=True)
    raise AssertionError(f"{path} is not full")


@pytest.fixture
def full_fs(tmp_path) -> Iterator[Path]:
    """A directory on its own small tmpfs (unmounted at teardown); fill it with ``fill``."""
    where = tmp_path / "small-fs"
    why = mount_tmpfs(where, "4m")
    if why:
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
