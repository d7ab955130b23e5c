"""The version gate refuses another version with its one line; the anchors are checked;
the serve wrapper runs SGLang's launcher with the patch loaded."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from server_control.sglang_patch import gate, serve  # noqa: E402

FAKE_VERSION_SCRIPT = r"""
import sglang, sglang.version
sglang.__version__ = sglang.version.__version__ = "0.5.22"
from server_control.sglang_patch import hook
hook.install()
import sglang.srt.server_args as sa
from sglang.srt.utils import common
common.configure_logger(sa.ServerArgs(model_path="x"), prefix=" TP1")
print("FIELDS", [f for f in sa.ServerArgs.__struct_fields__ if f.startswith("speculative_disable")])
"""


def run_python(args, env_extra=None, timeout=240):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = serve.PROJECT_ROOT
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=os.path.dirname(serve.PROJECT_ROOT),
                          start_new_session=True)


def test_installed_sglang_passes_the_gate():
    assert gate.check() is None
    assert gate.sglang_version() == "0.5.23"


def test_other_version_is_refused_by_reason():
    assert gate.check("0.5.22") == (
        "sglang 0.5.22 is not the supported 0.5.23; the patch is gated to that exact version")


def test_a_renamed_anchor_is_named():
    anchors = {"sglang.srt.speculative.eagle_worker_v2": {
        "EAGLEWorkerV2": ["activate_step_by_batch", "forward_batch_generation_v3"]}}
    assert gate.missing_anchor(anchors) == (
        "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.forward_batch_generation_v3")
    assert gate.missing_anchor({"sglang.srt.speculative.eagle_worker_v9": {"": []}}) == (
        "module sglang.srt.speculative.eagle_worker_v9")
    assert gate.missing_anchor({"sglang.srt.managers.scheduler_components.internal_state": {
        "SchedulerStateController": []}}) == (
        "sglang.srt.managers.scheduler_components.internal_state.SchedulerStateController")


def test_faked_other_version_logs_one_line_and_patches_nothing():
    proc = run_python(["-c", FAKE_VERSION_SCRIPT])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if "Dynamic speculation" in ln]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].endswith(" TP1] Dynamic speculation disable NOT active: sglang 0.5.22 is not "
                             "the supported 0.5.23; the patch is gated to that exact version")
    assert "FIELDS []" in proc.stdout


def test_serve_wrapper_runs_the_patched_launcher():
    proc = run_python(["-m", "server_control.sglang_patch.serve", "--help"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for flag in ("--speculative-disable-batch-threshold", "--speculative-disable-hysteresis",
                 "--speculative-disable-min-dwell-steps", "--speculative-disable-force-mode"):
        assert flag in proc.stdout
    assert "NOT active" not in proc.stdout + proc.stderr


def test_patched_env_puts_the_bootstrap_first():
    env = serve.patched_env({"PYTHONPATH": os.pathsep.join(["/x", serve.BOOTSTRAP_DIR])})
    assert env["PYTHONPATH"].split(os.pathsep) == [serve.BOOTSTRAP_DIR, serve.PROJECT_ROOT, "/x"]
    assert serve.command(["--port", "1"], python="py") == ["py", "-m", "sglang.launch_server",
                                                          "--port", "1"]
