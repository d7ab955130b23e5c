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
import time
import tomllib
from pathlib import Path

from tests.support import command_forkserver

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


def write_profile(
    rig: Rig,
    work: Path,
    port: int,
    *,
    tp: int = 1,
    threshold: int = 2,
    lifetime_s: int = 1500,
    name: str = "rig-e2e",
    env: dict | None = None,
    extra_args: tuple = (),
) -> Path:
    """Write a profile for this rig into ``work``; returns its path. ``env`` and
    ``extra_args`` are added to the shipped profile's."""
    doc = tomllib.loads(SHIPPED.read_text())
    doc["name"] = name
    server = doc["server"]
    server.update(
        python=str(watchdog_python(work / "python-watchdog", lifetime_s)),
        cwd=str(rig.root),
        model_path=str(rig.target),
        port=port,
        tp_size=tp,
        log_dir=str(work / "logs"),
    )
    doc["speculative"]["draft_model_path"] = str(rig.draft)
    doc["dynamic"]["threshold"] = threshold
    doc["env"].update(rig_env_vars(rig))
    doc["env"].update(env or {})
    server["extra_args"] = [*server["extra_args"], *extra_args]
    if tp > 1:
        doc["env"]["SGLANG_CPU_OMP_THREADS_BIND"] = omp_bind(tp)
    doc["restart"]["enabled"] = False  # a crash must fail the test, not be papered over
    path = work / f"{name}.toml"
    path.write_text(dump_toml(doc))
    return path


def specconsole(args: list[str], state_dir: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real ``specconsole`` command line (``python -m console``) in a subprocess."""
    full_env = dict(os.environ if env is None else env)
    full_env["SPECCONSOLE_STATE_DIR"] = str(state_dir)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), full_env.get("PYTHONPATH", "")) if p)
    return command_forkserver.run(args, env=full_env, cwd=REPO_ROOT, timeout=timeout)


class CliRun:
    """A rig server launched with ``specconsole launch`` on a written profile."""

    def __init__(
        self,
        rig: Rig,
        work: Path,
        *,
        tp: int = 1,
        threshold: int = 2,
        lifetime_s: int = 1500,
        name: str = "rig-e2e",
        env: dict | None = None,
        extra_args: tuple = (),
    ):
        from server_control.host.ports import free_port

        from .server import RigServer

        t0 = time.monotonic()  # the start counts from the launch, not from when it returned
        self.state_dir = work / "state"
        self.profile = write_profile(
            rig, work, free_port(), tp=tp, threshold=threshold, lifetime_s=lifetime_s, name=name, env=env, extra_args=extra_args
        )
        # bare (no detached supervisor): these servers prove the patch, and a crash they
        # provoke must stay a crash, not become another 30-s start of real SGLang
        res = self.cli("launch", "--wait", "600", "--json", "--no-supervise", timeout=660)
        lines = res.stdout.strip().splitlines()
        rec = (json.loads(lines[-1]).get("run") or {}) if lines else {}
        self.server = RigServer(
            proc=None,
            port=rec.get("port", 0),
            log_path=Path(rec.get("log_path") or work / "no-log"),
            group=rec.get("pgid"),
            started=t0,
            label=f"{name} tp{tp} via launch",
        )
        if res.returncode != 0:
            self.close()
            raise RuntimeError(
                f"specconsole launch failed ({res.returncode}):\n{res.stdout}\n{res.stderr}\n{self.server.log_tail()}"
            )

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return specconsole([*args, "--profile", str(self.profile)], self.state_dir, timeout)

    def close(self) -> list[int]:
        """Stop through specconsole, then (safety net) the process group we were told of."""
        if self.server.group is None or not self.server.processes():
            return []
        self.cli("stop", "--json", timeout=120)
        return self.server.stop(grace_s=10)
