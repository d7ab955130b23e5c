"""Figures a test run measures (server start-ups, rig builds), printed in the run's summary.

Under pytest-xdist each test runs in a worker process, while the summary is printed by the
controller: each figure is appended as one line to a file of its process in a directory the
controller made (``FIGURES_ENV``, inherited by the workers), and the controller reads them
all at the end. Without xdist the one process does both.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

FIGURES_ENV = "SPECCONSOLE_TEST_FIGURES_DIR"
STARTS = "real SGLang server start"  # the name of a start-up figure
COMMANDS = "specconsole command"  # one a test ran: "forked" or "exec'd, WHY" (tests/support/command_forkserver.py)


def make_dir() -> str | None:
    """The controller's figures directory (made once per run; None in a worker)."""
    if os.environ.get(FIGURES_ENV):
        return None
    path = tempfile.mkdtemp(prefix="specconsole-figures-")
    os.environ[FIGURES_ENV] = path
    return path


def remove_dir(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.environ.pop(FIGURES_ENV, None)


def record(line: str) -> None:
    """Append one figure line (no newline inside) for the run's summary."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    with open(Path(path) / f"{os.getpid()}.txt", "a", encoding="utf-8") as f:
        f.write(line.replace("\n", " ") + "\n")


def read_all() -> list[str]:
    path = os.environ.get(FIGURES_ENV)
    if not path or not os.path.isdir(path):
        return []
    lines: list[str] = []
    for name in sorted(os.listdir(path)):
        lines += (Path(path) / name).read_text(encoding="utf-8", errors="replace").splitlines()
    return lines


def summary(lines: list[str]) -> list[str]:
    """The figures, then server start-ups counted and summed, one line per configuration
    (the server's log name: how many starts, which test modules, their start-up time), then
    the `specconsole` commands the tests ran: how many forked, how many exec'd and why."""
    starts = [line for line in lines if line.startswith(STARTS + ":")]
    commands = [line[len(COMMANDS) + 1 :].strip() for line in lines if line.startswith(COMMANDS + ":")]
    rest = [line for line in lines if not line.startswith((STARTS + ":", COMMANDS + ":"))]
    total = 0.0
    by: dict[str, tuple[int, float, list[str]]] = {}
    for line in starts:
        fields = [part.strip() for part in line[len(STARTS) + 1 :].split(",")]
        name, seconds, modules = fields[0] if fields else "?", 0.0, []
        for part in fields[1:]:
            key, _, value = part.rpartition("=")
            if key == "start_s":
                try:
                    seconds = float(value)
                except ValueError:
                    seconds = 0.0
            elif key == "by":
                modules.append(value)
        total += seconds
        n, s, mods = by.get(name, (0, 0.0, []))
        by[name] = (n + 1, s + seconds, mods + [m for m in modules if m not in mods])
    out = [*rest, f"real SGLang servers started: {len(starts)}, start-up time {total:.0f} s in all"]
    for name, (n, s, mods) in sorted(by.items(), key=lambda kv: (-kv[1][0], kv[0])):
        out.append(f"  {n} x {name} ({s:.0f} s): {', '.join(mods) or '-'}")
    if commands:
        forked = commands.count("forked")
        why = Counter(c.removeprefix("exec'd, ") for c in commands if c != "forked")
        said = ", ".join(f"{n} {reason}" for reason, n in why.most_common())
        out.append(f"specconsole commands run by the tests: {forked} forked, {len(commands) - forked} exec'd ({said or 'none'})")
    return out
