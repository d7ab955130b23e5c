"""The `specconsole` command as a real process, for tests."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
    )


def start_cli(*args, groups) -> subprocess.Popen:
    """A console process in its own group (so the finalizer can kill it by that group)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "console", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=dict(os.environ),
    )
    groups.add(p.pid)
    return p


def read_until(p: subprocess.Popen, needle: str) -> list[str]:
    seen = []
    for line in p.stdout:  # blocks per line; the child prints as it goes
        seen.append(line.rstrip("\n"))
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} never printed; output: {seen}")
