"""A run launched by the flat layout before the packages (commit f140c24: the keeper started
as ``python -m server_control.keeper``, the run record written by that code) is adopted and
stopped by this layout: the command lines a live server was started with, and the record's
format, are a contract across an upgrade."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import psutil
import pytest

from server_control.config.profile import load_profile
from server_control.host import identity
from server_control.model.vocabulary import LIVE_STATES, RunState
from server_control.state import runs
from server_control.supervision.supervisor import Supervisor
from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
OLD_LAYOUT = "f140c24"  # the last commit of the flat server_control/ (before the layered packages)

LAUNCH_WITH_OLD_CODE = r"""
import asyncio, json, sys
import server_control
from server_control.profile import load_profile      # flat modules: only the old layout has these
from server_control.supervisor import Supervisor

async def main():
    sup = Supervisor(load_profile(sys.argv[1]))
    rec = await sup.launch()
    state = await sup.wait_ready(60)
    print(json.dumps({"pid": rec.pid, "pgid": rec.pgid, "state": state, "package": server_control.__file__}))

asyncio.run(main())
"""


def _old_tree(dest: Path) -> Path:
    """server_control/ as it was at OLD_LAYOUT, unpacked from git history (skip without it)."""
    try:
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", OLD_LAYOUT, "server_control"], capture_output=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"the old layout ({OLD_LAYOUT}) is not in this checkout's git history: {exc}")
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(dest, filter="data")
    assert (dest / "server_control" / "supervisor.py").is_file()  # the flat layout indeed
    return dest


async def test_run_launched_by_the_old_layout_is_adopted_and_stopped(tmp_path, make_profile, groups, state_dir):
    old = _old_tree(tmp_path / "old")
    path = make_profile("legacy", tp=2)
    env = {**os.environ, "PYTHONPATH": str(old)}
    out = subprocess.run(
        [sys.executable, "-c", LAUNCH_WITH_OLD_CODE, str(path)], cwd=old, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    launched = json.loads(out.stdout.strip().splitlines()[-1])
    groups.add(launched["pgid"])
    assert launched["package"].startswith(str(old)) and launched["state"] == "ready"

    rec = runs.load_record("legacy")
    assert rec is not None and rec.pid == launched["pid"]
    keeper = psutil.Process(rec.pid).parent()
    assert keeper.cmdline()[1:3] == ["-m", "server_control.keeper"]
    assert keeper.environ().get("PYTHONPATH", "").split(os.pathsep)[0] == str(old)  # the keeper runs the old code

    sup = Supervisor(load_profile(path))
    adopted = sup.adopt()
    assert adopted is not None and adopted.pid == rec.pid, sup.last_error
    assert sup.state in LIVE_STATES
    before = identity.run_processes(rec.identity())
    assert len(before) >= 3  # the server and its two TP ranks (and the keeper)

    res = await sup.stop()
    assert res.ok and res.was_running and not res.remaining, res.message
    assert sup.state == RunState.STOPPED and runs.load_record("legacy") is None
    assert identity.run_processes(rec.identity()) == []
    wait_for(
        lambda: not keeper.is_running() or keeper.status() == psutil.STATUS_ZOMBIE,
        timeout=30,
        what="the old keeper to exit after its server",
    )
