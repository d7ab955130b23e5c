"""`specconsole patch install --python PY` on the real package: a plain
``PY -m sglang.launch_server ... --speculative-disable-batch-threshold 5`` (no ``serve``,
no PYTHONPATH) logs the init line; after ``patch uninstall`` nothing of the patch is left
in PY's site-packages. PY is a fresh venv that sees the installed sglang (a .pth naming
the site-packages of the interpreter running the tests)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from server_control.host.ports import free_port
from server_control.sglang_patch import install
from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.build import REPO_ROOT, rig_env_vars, server_args
from tests.real_sglang.rig.server import RigServer

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(1200)]


def test_a_plain_launch_server_loads_the_installed_patch(rig, tmp_path):
    venv.EnvBuilder(with_pip=False).create(tmp_path / "venv")
    python = str(tmp_path / "venv" / "bin" / "python")
    site = install.site_dir(python)
    assert site.is_relative_to(tmp_path / "venv")  # never a shared interpreter
    spec = importlib.util.find_spec("sglang")
    assert spec is not None and spec.origin
    (site / "zz_sglang.pth").write_text(str(Path(spec.origin).parents[1]) + "\n")
    res = subprocess.run(
        [sys.executable, "-m", "console", "patch", "install", "--python", python, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(REPO_ROOT),
    )
    assert res.returncode == 0, res.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(rig_env_vars(rig))
    port = free_port()
    args = server_args(rig, port, extra=["--speculative-disable-batch-threshold", "5"])
    server = RigServer.start(
        [python, "-m", "sglang.launch_server", *args],
        env,
        tmp_path / "installed-patch-launch-server.log",
        port,
        lifetime_s=SERVER_LIFETIME_S,
    )
    try:
        ready = server.wait_ready(timeout_s=900)
        report("plain launch_server with the patch installed (.pth)", ready_s=ready)
        log = server.log_text()
        assert "Dynamic speculation disable enabled: threshold=5, resume_at<=4" in log
        assert "NOT active" not in log
    finally:
        assert server.stop(grace_s=10) == []
    res = subprocess.run(
        [sys.executable, "-m", "console", "patch", "uninstall", "--python", python, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(REPO_ROOT),
    )
    assert res.returncode == 0 and json.loads(res.stdout)["removed"]
    assert sorted(p.name for p in site.iterdir() if "specconsole" in p.name) == []
