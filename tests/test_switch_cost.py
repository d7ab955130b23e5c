"""benchmarks/switch_cost.py's logic (not its speed): the trace analysis of
benchmarks/switch_trace.py, the window assertions and the seeded workload."""

import pytest

from benchmarks import switch_cost, switch_trace
from server_control.protocol import decision

S, T = decision.SPECULATIVE, decision.TARGET_ONLY


def _rows(modes: list[str], seconds: list[float], batch: int = 4, accepted: list[int] | None = None) -> list[list[float]]:
    """A trace as step_timing writes it: counters after each step, acceptance before it."""
    rows, spec, to, verifies, acc = [[0.0, 0.0, batch, 0, 0, 0, 0]], 0, 0, 0, 0
    for i, (mode, sec) in enumerate(zip(modes, seconds, strict=True)):
        spec, to = spec + (mode == S), to + (mode == T)
        rows.append([float(i + 1), sec, batch, spec, to, verifies, acc])
        if mode == S:  # this step's verifies show in the next row's "before" counters
            verifies += batch
            acc += (accepted[i] if accepted else 2) * batch
    rows.append([float(len(modes) + 1), 0.01, batch, spec + 1, to, verifies, acc])
    return rows


def test_steps_read_each_rows_mode_and_acceptance_from_the_counters():
    trace = switch_trace.steps(_rows([S, S, T, S], [0.01] * 4, accepted=[2, 1, 0, 2]))
    assert [s.mode for s in trace] == [S, S, T, S, S]
    assert [(s.verifies, s.accepted) for s in trace[:4]] == [(4, 8), (4, 4), (0, 0), (4, 8)]
    assert trace[-1].verifies is None  # the last step: no later read


def test_a_row_where_no_counter_moved_is_refused():
    rows = _rows([S, S], [0.01, 0.01])
    rows[2][3] = rows[1][3]
    with pytest.raises(ValueError, match="trace row 2"):
        switch_trace.steps(rows)


def test_switch_latency_is_the_first_step_against_steady_steps_of_its_mode():
    modes = [S] * 6 + [T] * 6 + [S] * 6
    # the first target-only step costs 5 ms more than steady target-only; the resume
    # step 2 ms more than steady speculative
    secs = [0.010] * 6 + [0.025] + [0.020] * 5 + [0.012] + [0.010] * 5
    lat = switch_trace.switch_latency(switch_trace.steps(_rows(modes, secs)))
    assert lat[T]["switches"] == 1 and lat[T]["extra_ms"] == [pytest.approx(5.0)]
    assert lat[S]["switches"] == 1 and lat[S]["extra_ms"] == [pytest.approx(2.0)]
    assert lat[S]["steady_ms_median"] == pytest.approx(10.0)


def test_switch_latency_without_a_steady_step_of_that_batch_is_unmatched():
    modes = [S] * 5 + [T] * 2 + [S] * 5  # two target-only steps: none settled
    lat = switch_trace.switch_latency(switch_trace.steps(_rows(modes, [0.01] * 12)))
    assert lat[T] == {**lat[T], "switches": 1, "unmatched": 1, "extra_ms_median": None}


def test_acceptance_around_resume_compares_the_steps_before_and_after():
    modes = [S] * 4 + [T] * 3 + [S] * 4
    accepted = [2] * 4 + [0] * 3 + [1, 1, 2, 2]
    (around,) = switch_trace.acceptance_around_resume(switch_trace.steps(_rows(modes, [0.01] * 11, accepted=accepted)), 3)
    assert around["target_only_steps"] == 3 and around["before_steps"] == 3 and around["after_steps"] == 3
    assert around["before"] == pytest.approx(3.0)
    assert around["after"] == pytest.approx(1 + 4 / 3)


def test_window_steps_pick_the_window_by_the_patch_step_numbers():
    rows = _rows([S] * 10, [0.01] * 10)
    picked = switch_cost.window_steps(rows, 3, 7)  # rows whose step total is 3..7: steps 4..7
    assert len(picked) == 4 and all(s.mode == S for s in picked)


def test_arm_problem_catches_a_forced_arm_off_its_mode_and_an_auto_window_that_never_switched():
    forced_ok = {"steps": {S: 10, T: 0}, "target_only_share": 0.0, "force": S}
    assert switch_cost.arm_problem(S, forced_ok, 0) is None
    leaked = {"steps": {S: 9, T: 1}, "target_only_share": 0.1, "force": S}
    assert "ran target-only" in switch_cost.arm_problem(S, leaked, 1)
    both = {"steps": {S: 9, T: 5}, "target_only_share": 5 / 14, "force": "auto"}
    assert switch_cost.arm_problem(decision.AUTO, both, 3) is None
    assert "no switch" in switch_cost.arm_problem(decision.AUTO, both, 0)
    one = {"steps": {S: 9, T: 0}, "target_only_share": 0.0, "force": "auto"}
    assert "one mode only" in switch_cost.arm_problem(decision.AUTO, one, 2)
    assert "no step counters" in switch_cost.arm_problem(decision.AUTO, None, None)


def test_every_arm_of_a_round_replays_the_same_draws():
    a = switch_cost.draws(7, 50, (16, 64), (0.0, 0.6))
    assert a == switch_cost.draws(7, 50, (16, 64), (0.0, 0.6))
    assert a != switch_cost.draws(8, 50, (16, 64), (0.0, 0.6))
    assert all(16 <= n <= 64 and 0.0 <= p <= 0.6 for n, p in a)


def test_summarise_ratio_is_auto_over_the_better_fixed_arm_per_round():
    rnd = [
        {"arm": decision.AUTO, "tok_s": 90.0, "switches": 4, "errors": 0, "problem": None},
        {"arm": S, "tok_s": 100.0, "switches": 0, "errors": 0, "problem": None},
        {"arm": T, "tok_s": 60.0, "switches": 0, "errors": 0, "problem": "x"},
    ]
    out = switch_cost.summarise([rnd])
    assert out["auto_over_best_fixed_per_round"] == [pytest.approx(0.9)]
    assert out["problems"] == ["round 0 target_only: x"]


def test_mode_mix_weights_each_forced_rate_by_autos_time_in_that_mode():
    auto = {"tok_s": 150.0, "steps": {"steps": {S: 10, T: 30}, "ms_per_step_by_mode": {S: 30.0, T: 10.0}}}
    # half of auto's decode time in each mode: the prediction is the mean of the forced rates
    assert switch_cost.mix_prediction(auto, {"tok_s": 200.0}, {"tok_s": 100.0}) == pytest.approx(150.0)
    assert switch_cost.mix_prediction({"tok_s": 1.0, "steps": None}, {"tok_s": 2.0}, {"tok_s": 1.0}) is None
    rnd = [
        {"arm": decision.AUTO, "errors": 0, "problem": None, "switches": 3, **auto},
        {"arm": S, "tok_s": 200.0, "switches": 0, "errors": 0, "problem": None},
        {"arm": T, "tok_s": 100.0, "switches": 0, "errors": 0, "problem": None},
    ]
    assert switch_cost.summarise([rnd])["auto_over_mode_mix_per_round"] == [pytest.approx(1.0)]


def test_matched_cost_compares_autos_steps_with_forced_steps_of_the_same_batch():
    auto = switch_trace.step_ms(switch_trace.steps(_rows([S] * 4, [0.012] * 4, batch=3)))
    forced = switch_trace.step_ms(switch_trace.steps(_rows([S] * 4, [0.010] * 4, batch=3)))
    assert auto[S]["3"][0] == 5  # 4 steps + the closing row's
    cost = switch_trace.matched_cost(auto, forced, S)
    assert cost["steps_matched"] == 5 and cost["auto_over_forced"] == pytest.approx(12 / 10)  # medians 12 and 10 ms
    other = switch_trace.step_ms(switch_trace.steps(_rows([S] * 4, [0.010] * 4, batch=5)))
    assert switch_trace.matched_cost(auto, other, S) == {"steps_matched": 0, "auto_over_forced": None}


def test_the_rig_trace_rows_are_what_switch_trace_reads(monkeypatch):
    """rig/step_timing.py's traced run_batch (fake scheduler and batch; the real module):
    the counters after the step, acceptance before it, decode batches only."""
    from types import SimpleNamespace

    from tests.real_sglang.rig import step_timing

    switch = SimpleNamespace(steps={S: 0, T: 0}, verifies=0, accepted_drafts=0)
    scheduler = SimpleNamespace(draft_worker=SimpleNamespace(_dynspec=SimpleNamespace(switch=switch)))

    def run_batch(self, batch):
        switch.steps[batch.mode] += 1
        if batch.mode == S:  # settled by the time the next step starts
            switch.verifies, switch.accepted_drafts = switch.verifies + 2, switch.accepted_drafts + 3

    def batch(mode, decode=True):
        return SimpleNamespace(mode=mode, batch_size=lambda: 2, forward_mode=SimpleNamespace(is_decode=lambda: decode))

    monkeypatch.setattr(step_timing, "_TRACE", [])
    traced = step_timing._traced(run_batch)
    for mode in (S, T, S, S):
        traced(scheduler, batch(mode))
    traced(scheduler, batch(S, decode=False))  # a prefill: not a row
    rows = step_timing._TRACE
    assert [r[2:] for r in rows] == [[2, 1, 0, 0, 0], [2, 1, 1, 2, 3], [2, 2, 1, 2, 3], [2, 3, 1, 4, 6]]
    trace = switch_trace.steps(rows)
    assert [s.mode for s in trace] == [T, S, S]
    assert [(s.verifies, s.accepted) for s in trace] == [(0, 0), (2, 3), (None, None)]
