"""The `specconsole` command as a real process, for tests: ``cli`` forks it from the fork
server (tests/support/command_forkserver.py: the same process a fresh interpreter would be,
without paying for the interpreter's start and imports), ``exec_cli`` starts a fresh
interpreter, ``start_cli`` a long-running one in its own process group."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import command_forkserver


def cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return command_forkserver.run(args, timeout=timeout)


def exec_cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return command_forkserver.exec_run(args, timeout=timeout)


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
