"""Profiles for rig servers launched through server_control (test rig only).

``write_profile()`` starts from the shipped ``assets/profiles/cpu-tiny-eagle3.toml`` and
points it at this run's rig build, a free port, a per-test state/log dir and a watchdog
interpreter (``timeout`` in front of the real Python, so the whole server process group
dies after ``lifetime_s`` even if the test process is killed).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from .build import REPO_ROOT, Rig, omp_bind, rig_env_vars

SHIPPED = REPO_ROOT / "assets" / "profiles" / "cpu-tiny-eagle3.toml"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def dump_toml(doc: dict) -> str:
    """TOML for a profile-shaped document: top-level scalars, then one table per section."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for section, table in doc.items():
        if isinstance(table, dict):
            lines.append(f"\n[{section}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def watchdog_python(path: Path, lifetime_s: int, python: str | None = None) -> Path:
    """An executable that runs the real interpreter under ``timeout`` (kills the group)."""
    real = shlex.quote(python or sys.executable)
    path.write_text(f'#!/bin/sh\nexec timeout -k 15 {int(lifetime_s)} {real} "$@"\n')
    path.chmod(0o755)
    return path


def write_profile(rig: Rig, work: Path, port: int, *, tp: int = 1, threshold: int = 2,
                 lifetime_s: int = 1500, name: str = "rig-e2e") -> Path:
    """Write a profile for this rig into ``work``; returns its path."""
    doc = tomllib.loads(SHIPPED.read_text())
    doc["name"] = name
    server = doc["server"]
    server.update(python=str(watchdog_python(work / "python-watchdog", lifetime_s)),
                  cwd=str(rig.root), model_path=str(rig.target), port=port, tp_size=tp,
                  log_dir=str(work / "logs"))
    doc["speculative"]["draft_model_path"] = str(rig.draft)
    doc["dynamic"]["threshold"] = threshold
    doc["env"].update(rig_env_vars(rig))
    if tp > 1:
        doc["env"]["SGLANG_CPU_OMP_THREADS_BIND"] = omp_bind(tp)
    doc["restart"]["enabled"] = False  # a crash must fail the test, not be papered over
    path = work / f"{name}.toml"
    path.write_text(dump_toml(doc))
    return path


def specconsole(args: list[str], state_dir: Path, timeout: float = 600,
                env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real ``specconsole`` command line (``python -m console``) in a subprocess."""
    full_env = dict(os.environ if env is None else env)
    full_env["SPECCONSOLE_STATE_DIR"] = str(state_dir)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), full_env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "console", *args], env=full_env,
                          cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=timeout)
