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


def test_the_cold_arm_is_summarised_beside_plain_its_host_part_apart():
    """``--cold``: target-only with the draft's extend skipped, its period less its forward
    (and any extend) is the host's part; plain over it per step, overall and round by round."""

    def row(period, fwd_key, fwd, extend=None, rounds=()):
        r = {"batch": 16, "step_period": period, fwd_key: fwd, "load_1m": 1.0, "rounds": [{"step_period": p} for p in rounds]}
        if extend is not None:
            r["draft_extend"] = extend
        return r

    result = {
        "models": "crossover",
        "plain": [row(100.0, "target:DECODE", 97.0, rounds=(100.0, 90.0))],
        "target_only": [row(106.0, "target:TARGET_VERIFY", 97.5, extend=5.0)],
        "target_only_cold": [row(101.0, "target:TARGET_VERIFY", 97.5, rounds=(101.0, 100.0))],
        "speculative": [row(300.0, "target:TARGET_VERIFY", 250.0, extend=9.0)],
    }
    (r,) = rig_cost.summarise(result)
    assert r["cold_draft_extend_ms"] is None  # no extend ran in the cold windows
    assert r["cold_overhead_ms"] == 101.0 - 97.5 and r["overhead_ms"] == 3.0
    assert r["cold_over_plain_period"] == 100.0 / 101.0
    assert r["cold_over_plain_by_round"] == [100.0 / 101.0, 0.9]
    assert "plain / cold per step" in rig_cost.render([r])
    result.pop("target_only_cold")  # a run without --cold: the columns are empty, not an error
    (r,) = rig_cost.summarise(result)
    assert r["cold_period_ms"] is None and r["cold_over_plain_by_round"] == []
