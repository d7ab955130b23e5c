"""benchmarks/rig_cost.py's reading of rig/step_timing.py's totals: wall and CPU columns
(no server; the timing module's real record/snapshot)."""

from __future__ import annotations

from benchmarks import rig_cost
from tests.real_sglang.rig import step_timing


def test_step_timing_records_wall_and_cpu_and_rig_cost_diffs_both(monkeypatch):
    monkeypatch.setattr(step_timing, "_TOTALS", {})
    monkeypatch.setattr(step_timing, "_WRITER", [object()])  # no writer thread
    step_timing.record("target:DECODE", 8, 0.2, 0.1)
    before = step_timing.snapshot()
    step_timing.record("target:DECODE", 8, 0.3, 0.25)
    step_timing.record("target:DECODE", 8, 0.5, 0.35)
    after = step_timing.snapshot()
    assert after["target:DECODE"]["8"] == [3, 1.0, 0.7]
    assert rig_cost._ms(after, before, "target:DECODE", 8) == 400.0
    assert abs(rig_cost._ms(after, before, "target:DECODE", 8, col=2) - 300.0) < 1e-9
    assert rig_cost._ms(after, before, "target:DECODE", 16) is None


def test_a_totals_file_without_the_cpu_column_reads_as_zero_cpu():
    old = {"step_period": {"8": [2, 0.4]}}
    assert rig_cost._diff(old, {}, "step_period", 8) == (2, 0.4)
    assert rig_cost._diff(old, {}, "step_period", 8, col=2) == (2, 0.0)


def test_the_patch_per_step_calls_are_timed_by_batch(monkeypatch):
    import types

    monkeypatch.setattr(step_timing, "_TOTALS", {})
    monkeypatch.setattr(step_timing, "_WRITER", [object()])
    module = types.SimpleNamespace(
        on_decode_step=lambda worker, bs, original: "decided",
        on_verified=lambda worker, n, bs, original: "counted",
    )
    step_timing.patch_switch(module)
    assert module.on_decode_step(None, 8, None) == "decided"
    assert module.on_verified(None, [1, 0, 2], 3, None) == "counted"
    snap = step_timing.snapshot()
    assert snap["patch:on_decode_step"]["8"][0] == 1 and snap["patch:on_verified"]["3"][0] == 1
