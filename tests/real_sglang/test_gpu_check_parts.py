"""scripts/gpu-check's parts that need no server (cheap, every CI run): the time budget's
plan (gpu_budget.py) and the capture fault of the tp rig (tp_faults.failing_captures)
against SGLang's real CUDA-graph backend classes.

Negative controls (run by hand): ``plan`` ranking by run order instead of priority fails
``test_the_plan_keeps_the_most_valuable_first``; the fault wrapper raising on the first
forward (a warm-up, outside the capture) fails ``test_the_capture_fault_fires_inside_the_capture``.
"""

from __future__ import annotations

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG
from tests.real_sglang.rig import gpu_budget, gpu_check, gpu_checks


def test_the_plan_keeps_the_most_valuable_first():
    order = list(gpu_budget.STEPS)
    est = gpu_budget.estimates(30, [1, 4, 16], 2, 5, 1)
    kept, skipped = gpu_budget.plan(order, 420, est)
    assert sum(est[k] for k in kept) <= 420
    must = {k for k, (prio, _) in gpu_budget.STEPS.items() if prio == 1}
    assert must <= kept
    # priority 2 (the flips, the capture fault) before the sweeps
    assert "forced flips under load" in kept and "a rank fails inside a capture" in kept
    assert "tok/s per mode" in skipped
    assert skipped["tok/s per mode"].startswith("skipped for time: needs ~")
    # a kept step never has a lower priority than a skipped one that would have fit
    worst_kept = max(gpu_budget.STEPS[k][0] for k in kept)
    assert all(gpu_budget.STEPS[k][0] >= worst_kept or est[k] > 420 - sum(est[j] for j in kept) for k in skipped)
    assert gpu_budget.plan(order, 0, est) == (set(order), {})
    kept_reversed, _ = gpu_budget.plan(order[::-1], 420, est)  # priority, not run order
    assert must <= kept_reversed and "tok/s per mode" not in kept_reversed


def test_the_budget_skips_what_no_longer_fits(monkeypatch):
    monkeypatch.setenv(gpu_budget.T0_ENV, "0")  # started long ago: nothing is left
    budget = gpu_budget.Budget(420, {"x": 5.0}, ["x"])
    assert budget.allows("x").startswith("skipped for time")
    monkeypatch.delenv(gpu_budget.T0_ENV)
    assert gpu_budget.Budget(420, {"x": 5.0}, ["x"]).allows("x") is None
    assert gpu_budget.Budget(0, {"x": 1e9}, ["x"]).allows("x") is None


def test_skipped_for_time_is_not_a_failure():
    checks = gpu_checks.Checklist()
    checks.run("fine", lambda: ("ok", {}))
    checks.skip_for_time("later", "skipped for time: needs ~90 s, 10 s left")
    assert not checks.failed
    assert checks.summary().splitlines()[1] == "SKIP  later: skipped for time: needs ~90 s, 10 s left"
    assert checks.summary().splitlines()[-1] == "gpu-check: all passed (1/1 checks, 1 skipped)"
    checks.skip("broken", "not run: an earlier step failed")
    assert checks.failed


def test_a_budget_too_small_for_the_core_fails_the_run(monkeypatch):
    monkeypatch.setenv(gpu_budget.T0_ENV, "0")  # nothing left
    checks = gpu_checks.Checklist()
    budget = gpu_budget.Budget(60, {"start patched": 90.0, "adaptive on": 110.0}, ["start patched", "adaptive on"])
    step = gpu_check._stepper(checks, budget, {"runtime threshold"})
    assert not step("start patched", "start x", lambda: ("ran", {}))
    assert not step("adaptive on", "adaptive on", lambda: ("ran", {}))
    assert not step("runtime threshold", "runtime threshold", lambda: ("ran", {}))
    assert [(r.name, r.ok, r.skipped) for r in checks.results] == [
        ("start x", False, False),  # priority 1 left out: a failure
        ("adaptive on", None, True),
        ("runtime threshold", None, True),
    ]
    assert "does not fit --budget-s" in checks.results[0].detail and checks.failed


def test_skip_names_are_checked():
    assert gpu_check.parse(["--device", "cpu", "--skip", "tok/s per mode"]).skip == ["tok/s per mode"]
    assert gpu_check.parse(["--device", "cpu"]).budget_s == 0
    assert gpu_check.parse([]).budget_s == 420
    with pytest.raises(SystemExit):
        gpu_check.parse(["--skip", "nonsense"])


@SKIP_NO_SGLANG
@pytest.mark.sglang  # imports SGLang's graph backends (sglang and torch: ~7 CPU-s), so the SGLang tier's
def test_the_capture_fault_fires_inside_the_capture():
    """A backend subclass of SGLang's real base class, capturing like FullCudaGraphBackend
    (two warm-up forwards, then the one under capture): the second capture_one raises from
    its third forward; the first passes; SGLang's classes are restored afterwards."""
    from sglang.srt.model_executor.runner_backend.base_cuda_graph_backend import BaseCudaGraphBackend
    from sglang.srt.model_executor.runner_backend.full_cuda_graph_backend import FullCudaGraphBackend

    from tests.real_sglang.rig import tp_faults

    calls: list[str] = []

    class Recorder(BaseCudaGraphBackend):  # type: ignore[misc]
        def __init__(self) -> None:
            pass

        def capture_one(self, shape_key, forward_fn, capture_inputs=None, post_warmup_hook=None):
            for phase in ("warmup", "warmup", "capture"):
                calls.append(phase)
                forward_fn()

        def __getattr__(self, name):  # the abstract rest is never called here
            raise AttributeError(name)

    Recorder.__abstractmethods__ = frozenset()
    full = FullCudaGraphBackend.__dict__["capture_one"]
    with tp_faults.failing_captures() as fired:
        assert FullCudaGraphBackend.__dict__["capture_one"] is not full  # SGLang's real one wrapped
        backend = Recorder()
        backend.capture_one("bs1", lambda: None)
        assert calls == ["warmup", "warmup", "capture"] and not fired
        with pytest.raises(RuntimeError, match="fail_capture inside a CUDA-graph capture"):
            backend.capture_one("bs2", lambda: None)
        assert calls[3:] == ["warmup", "warmup", "capture"] and fired == [tp_faults.INJECTED]
    assert FullCudaGraphBackend.__dict__["capture_one"] is full


def test_the_itl_ratio_of_a_zero_p50_is_undefined_not_a_crash():
    """CI's loaded run: plain's console-arm p50 gap was 0 (tokens read together) and the ITL
    check died with ZeroDivisionError instead of reporting."""
    import math

    from tests.real_sglang.rig.gpu_checks_polling import _over

    def row(p50, base):
        return {"p50_s": p50, "base_s": base}

    table = {"patched/console": row(0.02, 0.01), "plain/console": row(0.0, 0.01)}
    assert math.isnan(_over(table, "console"))
    table["plain/console"] = row(0.01, 0.01)
    assert _over(table, "console") == 2.0
