"""The version gate refuses another version with its one line; the anchors are checked;
the serve wrapper runs SGLang's launcher with the patch loaded."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from server_control.sglang_patch import gate, serve  # noqa: E402

FAKE_VERSION_SCRIPT = r"""
import json, sys
import sglang, sglang.version
sglang.__version__ = sglang.version.__version__ = "0.5.22"
from server_control.sglang_patch import gate, hook
hook.install()
if "--no-report-anchors" in sys.argv:  # as if SGLang had renamed the internal-state controller
    gate.REPORT_ANCHORS = {"sglang.srt.managers.scheduler_components.internal_state": {
        "SchedulerStateController": []}}
hook.mark_serve_main()
sys.argv[:] = ["launch_server", "--model-path", "m", "--speculative-disable-batch-threshold", "5",
               "--speculative-disable-force-mode=target_only"]
import sglang.srt.server_args as sa
from sglang.srt.utils import common
common.configure_logger(sa.ServerArgs(model_path="x"), prefix=" TP1")
args = sa.prepare_server_args(sys.argv[1:])
import sglang.srt.speculative.eagle_worker_v2 as ew
import sglang.srt.managers.scheduler_components.internal_state as ist
print("RESULT " + json.dumps({
    "mode": hook.mode(), "argv": sys.argv[1:],
    "threshold": getattr(args, "speculative_disable_batch_threshold", None),
    "fields": [f for f in sa.ServerArgs.__struct_fields__ if f.startswith("speculative_disable")],
    "worker_patched": getattr(ew.EAGLEWorkerV2, "_specconsole_patched", False),
    "controller_patched": getattr(ist.SchedulerInternalStateController, "_specconsole_patched", False)}))
"""


def run_python(args, env_extra=None, timeout=240):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = serve.PROJECT_ROOT
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=os.path.dirname(serve.PROJECT_ROOT),
        start_new_session=True,
    )


def test_installed_sglang_passes_the_gate():
    assert gate.check() is None
    assert gate.sglang_version() == "0.5.23"


def test_other_version_is_refused_by_reason():
    assert gate.check("0.5.22") == ("sglang 0.5.22 is not the supported 0.5.23; the patch is gated to that exact version")


def test_a_renamed_anchor_is_named():
    anchors = {
        "sglang.srt.speculative.eagle_worker_v2": {"EAGLEWorkerV2": ["activate_step_by_batch", "forward_batch_generation_v3"]}
    }
    assert gate.missing_anchor(anchors) == ("sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.forward_batch_generation_v3")
    assert gate.missing_anchor({"sglang.srt.speculative.eagle_worker_v9": {"": []}}) == (
        "module sglang.srt.speculative.eagle_worker_v9"
    )
    assert gate.missing_anchor({"sglang.srt.managers.scheduler_components.internal_state": {"SchedulerStateController": []}}) == (
        "sglang.srt.managers.scheduler_components.internal_state.SchedulerStateController"
    )


def _fake_version_run(*extra: str) -> tuple[dict, list[str], str]:
    proc = run_python(["-c", FAKE_VERSION_SCRIPT, *extra])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    lines = [ln for ln in proc.stderr.splitlines() if "Dynamic speculation" in ln]
    return result, lines, proc.stderr


NOT_SUPPORTED = (
    "Dynamic speculation disable NOT active: sglang 0.5.22 is not the supported 0.5.23; the patch is gated to that exact version"
)


def test_faked_other_version_still_parses_the_flags_with_the_switch_off():
    """Fail mode: the flags parse, the switch stays off, one NOT active line; only the
    report-only parts are applied (fields + the internal-state controller)."""
    result, lines, stderr = _fake_version_run()
    assert len(lines) == 1 and lines[0].endswith(" TP1] " + NOT_SUPPORTED), stderr[-3000:]
    assert result["mode"] == "report"
    assert result["threshold"] == 5 and len(result["fields"]) == 7
    assert result["argv"][-1] == "--speculative-disable-force-mode=target_only"  # untouched
    assert result["worker_patched"] is False  # the switch itself is not applied
    assert result["controller_patched"] is True  # it reports why


def test_without_the_report_anchors_the_flags_are_dropped_so_the_server_still_starts():
    result, lines, stderr = _fake_version_run("--no-report-anchors")
    assert result["mode"] == "off"
    assert result["fields"] == [] and result["threshold"] is None
    assert result["argv"] == ["--model-path", "m"]  # SGLang's parser did not see the flags
    assert result["controller_patched"] is False
    assert lines[0].endswith(" TP1] " + NOT_SUPPORTED), stderr[-3000:]
    assert lines[1].endswith(
        "] Dynamic speculation: ignored --speculative-disable-batch-threshold 5 "
        "--speculative-disable-force-mode=target_only (the patch is not active in this "
        "server; see the NOT active line)"
    ), stderr[-3000:]


@pytest.mark.parametrize("flags", [(), ("-I",), ("-E",), ("-S",)])
def test_serve_wrapper_runs_the_patched_launcher(flags):
    """``serve`` under -I / -E / -S too: the launcher it execs is a plain interpreter start
    (no flags) with the bootstrap on PYTHONPATH, so the patch loads there all the same
    (-I and -E find ``server_control`` as installed; -S through PYTHONPATH)."""
    proc = run_python([*flags, "-m", "server_control.sglang_patch.serve", "--help"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for flag in (
        "--speculative-disable-batch-threshold",
        "--speculative-disable-hysteresis",
        "--speculative-disable-min-dwell-steps",
        "--speculative-disable-force-mode",
    ):
        assert flag in proc.stdout
    assert "NOT active" not in proc.stdout + proc.stderr


def test_patched_env_puts_the_bootstrap_first():
    env = serve.patched_env({"PYTHONPATH": os.pathsep.join(["/x", serve.BOOTSTRAP_DIR])})
    assert env["PYTHONPATH"].split(os.pathsep) == [serve.BOOTSTRAP_DIR, "/x"]
    assert serve.command(["--port", "1"], python="py") == ["py", "-m", "sglang.launch_server", "--port", "1"]
