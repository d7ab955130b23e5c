"""An operator's own ``launch_server`` with the patch installed, beside SGLang's adaptive
controller: one tp 1 server (constant models: every draft accepted), the tests in file order.

* The installed patch (`specconsole patch install --python PY` on the real package): a plain
  ``PY -m sglang.launch_server ... --speculative-disable-batch-threshold 2`` (no ``serve``,
  no PYTHONPATH) logs the init line; after ``patch uninstall`` nothing of the patch is left
  in PY's site-packages (the last test, once the server stopped). PY is a fresh venv that
  sees the installed sglang (a .pth naming the site-packages of the interpreter running the
  tests).
* ``--speculative-adaptive`` together with the threshold. SGLang's adaptive controller runs
  one slot for every batch size (a config file: candidate steps [1, 2], starting at 2). At
  or below N the controller decides (2 steps: accept length 3.00); above N the patch forces
  target-only (1.00). The forced steps accept no draft; had they fed the controller, its
  slot's EMA would fall below its drop mark during the burst and it would pick 1 step
  (accept length 2.00 after the burst). So after the burst concurrency 1 must speculate at
  3.00 again, and SGLang must never have switched the controller to 1 step. Negative
  control (run by hand: ``on_verified`` in sglang_patch/worker.py made to feed forced steps
  too): that test fails, concurrency 1 after the burst accepting 2.58.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
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
TOKENS_C1 = 31
TOKENS_C6 = 61  # 60 decode steps, all forced target-only: far more than the slot's updates
SLOT = {
    "candidate_steps": [1, 2],
    "warmup_batches": 2,
    "update_interval": 2,
    "down_hysteresis": 0.0,
}  # drops to 1 step once its EMA of accepted drafts <= 0.5
# the rig profile's rule (assets/profiles/cpu-tiny-eagle3.toml): N 2, hysteresis 1, dwell 4
DYNAMIC = [
    "--speculative-disable-batch-threshold",
    "2",
    "--speculative-disable-hysteresis",
    "1",
    "--speculative-disable-min-dwell-steps",
    "4",
]


def _patch_cli(action: str, python: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", "patch", action, "--python", python, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(REPO_ROOT),
    )


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> str:
    """A fresh venv's interpreter that sees the installed sglang, the patch installed in it."""
    work = tmp_path_factory.mktemp("installed-patch")
    venv.EnvBuilder(with_pip=False).create(work / "venv")
    python = str(work / "venv" / "bin" / "python")
    site = install.site_dir(python)
    assert site.is_relative_to(work / "venv")  # never a shared interpreter
    spec = importlib.util.find_spec("sglang")
    assert spec is not None and spec.origin
    (site / "zz_sglang.pth").write_text(str(Path(spec.origin).parents[1]) + "\n")
    res = _patch_cli("install", python)
    assert res.returncode == 0, res.stderr
    return python


@pytest.fixture(scope="module")
def server(rig, python, tmp_path_factory):
    work = tmp_path_factory.mktemp("adaptive")
    config = work / "adaptive.json"
    config.write_text(json.dumps({"1": SLOT}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(rig_env_vars(rig))
    port = free_port()
    adaptive = ["--speculative-adaptive", "--speculative-adaptive-config", str(config)]
    args = server_args(rig, port, extra=[*DYNAMIC, *adaptive, "--decode-log-interval", "4"])
    server = RigServer.start(
        [python, "-m", "sglang.launch_server", *args],
        env,
        work / "installed-patch-launch-server.log",
        port,
        lifetime_s=SERVER_LIFETIME_S,
    )
    server.label = "rig-installed-patch-adaptive"
    try:
        ready = server.wait_ready(timeout_s=900)
        report("plain launch_server, the patch installed (.pth), adaptive on", ready_s=ready)
        yield server
    finally:
        assert server.stop(grace_s=10) == []


def _accept_length(meta: dict) -> float:
    assert meta["spec_verify_ct"] > 0, meta
    return 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"]


def _live(server) -> dict:
    (state,) = server.request("/server_info")["internal_states"]
    return state["dynamic_speculation"]


def test_a_plain_launch_server_loads_the_installed_patch(server):
    log = server.log_text()
    assert "Dynamic speculation disable enabled: threshold=2, resume_at<=1" in log
    assert "NOT active" not in log


def test_the_switch_is_active_with_the_adaptive_controller(server):
    log = server.log_text()
    assert "speculative_adaptive disabled" not in log
    live = _live(server)
    assert live["active"] is True and live["num_steps"] == 2


def test_concurrency_1_runs_the_controllers_two_steps(server):
    out = server.generate("the quick brown fox", TOKENS_C1)
    assert _accept_length(out["meta_info"]) == pytest.approx(3.0)
    assert _live(server)["mode"] == "speculative"


def test_concurrency_6_is_forced_target_only(server):
    start = len(server.log_text())
    for out in server.generate_batch(6, TOKENS_C6):
        assert out["meta_info"]["completion_tokens"] == TOKENS_C6
        assert out["meta_info"]["spec_num_correct_drafts"] == 0, out["meta_info"]
    assert re.search(r"switched to target-only \(decode batch \d+ > threshold 2\)", server.log_text()[start:])
    live = _live(server)
    assert (live["mode"], live["num_steps"]) == ("target_only", 0)
    assert live["steps"]["target_only"] >= TOKENS_C6 - 1


def test_after_the_burst_the_controller_was_not_fed_the_forced_steps(server):
    out = server.generate("the quick brown fox", TOKENS_C1)
    assert _accept_length(out["meta_info"]) == pytest.approx(3.0), out["meta_info"]
    live = _live(server)
    assert (live["mode"], live["num_steps"]) == ("speculative", 2)
    # SGLang logs each of its controller's step changes; it never went to 1 step
    assert not re.search(r"Switch adaptive runtime state: steps \d+ -> 1,", server.log_text())


def test_uninstall_leaves_nothing_of_the_patch(server, python):
    assert server.stop(grace_s=10) == []
    site = install.site_dir(python)
    res = _patch_cli("uninstall", python)
    assert res.returncode == 0 and json.loads(res.stdout)["removed"]
    assert sorted(p.name for p in site.iterdir() if "specconsole" in p.name) == []
