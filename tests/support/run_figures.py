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
from pathlib import Path

FIGURES_ENV = "SPECCONSOLE_TEST_FIGURES_DIR"
STARTS = "real SGLang server start"  # the name of a start-up figure


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
    """The figures, server start-ups counted and summed last."""
    starts = [line for line in lines if line.startswith(STARTS + ":")]
    rest = [line for line in lines if not line.startswith(STARTS + ":")]
    total = 0.0
    for line in starts:
        for part in line.split(","):
            key, _, value = part.strip().rpartition("=")
            if key.endswith("start_s"):
                total += float(value)
    return [*rest, f"real SGLang servers started: {len(starts)}, start-up time {total:.0f} s in all"]
