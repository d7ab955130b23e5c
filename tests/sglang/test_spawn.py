"""The bootstrap reaches processes started with the spawn method, the real parser takes the
new flags, and a ServerArgs carrying them crosses a spawn boundary."""

import multiprocessing
import os

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from server_control.sglang_patch.serve import BOOTSTRAP_DIR, PROJECT_ROOT  # noqa: E402
from tests.sglang import spawn_probe  # noqa: E402


@pytest.fixture(scope="module")
def spawned(tmp_path_factory):
    other = tmp_path_factory.mktemp("other_sitecustomize")
    (other / "sitecustomize.py").write_text("import sys\nsys._specconsole_test_chained = True\n")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "SPECCONSOLE_SGLANG_PRELOAD")}
    os.environ["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, PROJECT_ROOT, str(other)])
    os.environ["SPECCONSOLE_SGLANG_PRELOAD"] = "tests.sglang.preload_probe"
    try:
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        proc = ctx.Process(target=spawn_probe.child, args=(queue,))
        proc.start()
        try:
            result = queue.get(timeout=280)
        finally:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert "error" not in result, result["error"]
    return result


def test_bootstrap_runs_in_spawned_processes(spawned):
    for facts in (spawned, spawned["grandchild"]):
        assert facts["hook_installed"] is True
        assert facts["bootstrap_loaded"] is True
        assert facts["chained"] is True, "the shadowed sitecustomize must still run"
        assert facts["preload"] == {"sglang_imported_before": False}


def test_real_parser_accepts_the_flags(spawned):
    assert spawned["values"] == {
        "speculative_disable_batch_threshold": 7,
        "speculative_disable_hysteresis": 2,
        "speculative_disable_min_dwell_steps": 3,
        "speculative_disable_force_mode": "target_only",
    }
    assert spawned["defaults"] == {
        "speculative_disable_batch_threshold": 0,
        "speculative_disable_hysteresis": 1,
        "speculative_disable_min_dwell_steps": 10,
        "speculative_disable_force_mode": "auto",
    }
    for key in spawn_probe.KEYS:
        assert key in spawned["fields"]
    assert "speculative_disable_batch_threshold=7" in spawned["startup_line"]
    assert "speculative_disable_force_mode='target_only'" in spawned["startup_line"]


def test_real_parser_refuses_bad_values_with_the_reason(spawned):
    errors = spawned["errors"]
    assert "--speculative-disable-batch-threshold" in errors["negative"]
    assert "must be >= 0, got -1" in errors["negative"]
    assert "must be an integer, got 'many'" in errors["text"]
    assert "--speculative-disable-force-mode" in errors["force"]
    assert "'off'" in errors["force"]


def test_pickled_server_args_unpickle_in_a_spawned_process(spawned):
    grand = spawned["grandchild"]
    assert "error" not in grand, grand.get("error")
    assert grand["values"] == spawned["values"]
    assert "--speculative-disable-batch-threshold" in (grand["launch_command"] or "")
