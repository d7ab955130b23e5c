"""The self-tuning threshold: the tuner's decisions (pure) and the simulator applying them
once for every rank, logged with evidence; an operator's N turns it off."""

import time

import httpx
import pytest

from server_control.protocol import cost_curves as cc
from server_control.protocol.crossover import estimate
from server_control.protocol.tuner import MOVE_PREFIX, Tuner, TuneSettings, measured_limit, measured_reach, parse_bounds
from tests.support.advice import curves


def test_moves_toward_the_crossover_at_a_bounded_rate_then_holds():
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=1000, max_step=2))
    got, truth = curves(12, 0.2, 4000, 0.9, share=0.1)  # truth N = 8
    n, moves = 12, []
    for t in range(0, 200, 5):
        move = tuner.observe(float(t), got, n)
        if move:
            reach = measured_reach(estimate(got), n, move.new)
            assert move.old == n and (abs(move.new - move.old) <= 2 or move.new == reach)
            assert move.line.startswith(f"{MOVE_PREFIX}{n} -> {move.new} (auto: target-only faster from batch ")
            assert "tok/s, n=" in move.line
            n = move.new
            moves.append(move)
    assert moves and abs(n - (truth - 1)) <= 1
    assert tuner.observe(500.0, got, n) is None  # N inside the interval: it holds (hysteresis)


def test_where_exploration_measured_both_modes_n_jumps_to_the_measured_boundary():
    got, truth = curves(12, 0.2, 4000, 0.9, share=0.1)  # truth N = 8, explored 7..18
    e = estimate(got)
    assert abs(measured_reach(e, 12, 1) - (truth - 1)) <= 1  # target-only won at every bucket 9..12
    assert measured_reach(e, 12, 10) == 10  # never past the suggestion
    assert measured_reach(e, 12, 16) is None  # upward: target-only won at 13
    move = Tuner(TuneSettings(1, 32, interval_s=5, window_s=1000, max_step=2)).observe(5.0, got, 12)
    assert move is None  # the first reading starts the clock
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=1000, max_step=2))
    tuner.observe(0.0, got, 12)
    move = tuner.observe(5.0, got, 12)
    assert move is not None and abs(move.new - (truth - 1)) <= 1 and move.old == 12


def test_a_reversal_waits_for_a_second_decision_that_asks_for_it():
    up, _ = curves(3, 0.2, 8000, 0.95, share=0.1)  # speculation wins everywhere: up
    down, _ = curves(5, 0.0, 500, 0.65, share=0.1)  # target-only wins from batch ~3, measured at 3-8: down
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=6, max_step=2))
    tuner.observe(0.0, cc.Curves(32, 0, ()), 3)
    first = tuner.observe(5.0, up, 3)
    assert first is not None and first.new > 3
    n = first.new
    from server_control.advice.store import add

    later = add(up, down)
    tuner.observe(8.0, later, n)
    assert tuner.observe(12.0, later, n) is None  # the first ask to go back down: held
    again = tuner.observe(17.0, add(later, down), n)
    assert again is not None and again.new < n  # asked twice: it goes


def test_no_decision_more_often_than_the_interval_and_none_when_off():
    tuner = Tuner(TuneSettings(1, 32, interval_s=10, window_s=1000))
    got, _ = curves(12, 0.2, 4000, 0.9, share=0.1)
    assert tuner.observe(0.0, got, 12) is None
    assert tuner.observe(5.0, got, 12) is None  # before the interval
    assert tuner.observe(10.0, got, 12) is not None
    tuner.off("operator")
    assert tuner.observe(100.0, got, 12) is None and tuner.snapshot()["on"] is False


def test_only_the_window_counts_so_a_phase_change_is_followed():
    a, _ = curves(6, 0.2, 4000, 0.9, share=0.1, seed=1)  # long context: N ~ 8
    b, _ = curves(6, 0.0, 500, 0.777, share=0.1, seed=2)  # short: N ~ 4
    both = cc.Curves(32, 0, a.buckets)
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=20, max_step=8))
    tuner.observe(0.0, cc.Curves(32, 0, ()), 6)
    tuner.observe(30.0, both, 6)
    from server_control.advice.store import add

    later = add(both, b)
    tuner.observe(60.0, later, 6)
    move = tuner.observe(65.0, later, 6)
    assert move is None or move.new < 6
    assert tuner.observe(70.0, later, 9) is not None  # from 9 it moves down: the window is phase b


@pytest.mark.parametrize("text", ["8", "9-2", "a-b", "0-4"])
def test_bad_bounds_are_refused(text):
    with pytest.raises(ValueError, match="bounds"):
        parse_bounds(text)


def _live(url):
    (st,) = httpx.get(url + "/server_info", timeout=5).json()["internal_states"]
    return st["dynamic_speculation"]


def test_the_simulator_tunes_once_for_every_rank_and_the_operator_wins(sim_factory):
    sim = sim_factory(
        "--sim-auto-tune",
        "1-16",
        "--sim-explore-share",
        "0.1",
        threshold=10,
        traffic="phases:s=10000,c=1-14,period=12",
        time_scale=20,
    )
    sim.wait_ready()
    sim.wait_for_log(f"{MOVE_PREFIX}10 -> ", count=1)
    text = sim.log_path.read_text()
    line = next(ln for ln in text.splitlines() if f"{MOVE_PREFIX}10 -> " in ln)
    new = int(line.split(" -> ")[1].split(" ")[0])
    assert "(auto: " in line and new < 10
    # applied as a runtime change: every TP rank logs it
    sim.wait_for_log(f"threshold changed 10 -> {new}", count=2)
    assert "TP0]" in text or "TP0" in sim.log_path.read_text()
    live = _live(sim.url)
    assert live["auto_tune"]["on"] is True and live["auto_tune"]["moves"] >= 1
    assert {r["threshold"] for r in live["ranks"]} == {live["threshold"]}
    r = httpx.post(sim.url + "/set_internal_state", json={"server_args": {"speculative_disable_batch_threshold": 7}}, timeout=5)
    assert r.json() == [True]
    sim.wait_for_log("auto-tune off (threshold set to 7 by the operator)")
    time.sleep(1.5)  # 30 simulated seconds: no more moves
    live = _live(sim.url)
    assert live["threshold"] == 7 and live["auto_tune"]["on"] is False
    r = httpx.post(sim.url + "/set_internal_state", json={"server_args": {"speculative_disable_auto_tune": 1}}, timeout=5)
    assert r.json() == [True]
    assert _live(sim.url)["auto_tune"]["on"] is True


def test_a_move_decided_before_the_operator_set_n_is_dropped_not_applied():
    import logging
    import threading
    from types import SimpleNamespace

    from server_control.protocol import decision
    from server_control.sim.autotune import AUTO, AutoTune

    sched = SimpleNamespace(log=logging.getLogger("test-autotune"), cond=threading.Condition())
    tune = AutoTune(sched, TuneSettings(1, 16))
    assert tune.on_setting(decision.THRESHOLD_KEY, 8, AUTO) is None  # tuning on: applied
    assert tune.applied(decision.THRESHOLD_KEY, 7, "operator")  # the operator's 7 ...
    ok, text = tune.on_setting(decision.THRESHOLD_KEY, 8, AUTO)  # ... then the queued 8
    assert ok is False and "dropped" in text and "operator" in text


def test_a_context_shift_restarts_the_window():
    from server_control.advice.store import add

    long_ctx, _ = curves(8, 0.2, 8000, 0.95, share=0.1, seed=1)  # speculation wins everywhere
    short, _ = curves(8, 0.0, 500, 0.65, share=0.1, seed=2)  # target-only from batch ~3
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=1000, max_step=2))
    tuner.observe(0.0, cc.Curves(32, 0, ()), 8)
    tuner.observe(5.0, long_ctx, 8)
    both = add(long_ctx, short)
    tuner.observe(10.0, both, 8)  # the last 5 s: mean context 500 against 8000 before
    assert tuner._history[0][1] is long_ctx  # the window now starts at the shift
    move = tuner.observe(15.0, both, 8)
    assert move is not None and move.new < 8  # decided on the short-context steps alone


def _measured(rates, steps=400, seed=3):
    """Curves with both modes measured at each batch: {batch: (speculative, target-only
    tok/s)}; a speculative step commits 2 tokens per request, 3 % noise on step times."""
    import random

    rng, c, t = random.Random(seed), cc.CostCounters(), 0.0
    for _ in range(steps):
        for b, (spec, tgt) in rates.items():
            for mode, rate, per in (("speculative", spec, 2), ("target_only", tgt, 1)):
                c.step(mode, b, t, 500.0)
                t += b * per / rate * (1 + rng.gauss(0, 0.03))
                c.commit(mode, b, b * per)
    return cc.parse(c.snapshot())


def test_a_move_stops_before_a_batch_measured_the_other_way():
    """Near a flat optimum the sign fit can put the crossover below a bucket where
    speculation measured faster (target-only 5 % ahead at batch 1, 2 % behind at 2, far
    ahead at 3: the fit says target-only from batch 1): N moves down from 3 only to 2,
    never flipping batch 2 to the mode measured slower there."""
    got = _measured({1: (78.0, 82.0), 2: (151.0, 148.0), 3: (200.0, 260.0)})
    e = estimate(got)
    assert e.suggested == 1, e  # the fit's answer, past batch 2
    tuner = Tuner(TuneSettings(1, 16, interval_s=5, window_s=1000, max_step=2))
    tuner.observe(0.0, cc.Curves(32, 0, ()), 3)
    move = tuner.observe(5.0, got, 3)
    assert move is not None and (move.old, move.new) == (3, 2), move
    assert measured_limit(e, 3, 1) == 2 and measured_limit(e, 1, 3) == 2 and measured_limit(e, 2, 3) == 2


def test_a_blind_move_waits_for_steps_at_its_new_n_before_the_next():
    """On a slow real server (2-3 steps a second) one stale window stepped N up three times
    in 12 s, 17 -> 19 -> 21 -> 23, each "speculation faster at every measured batch" from
    the same steps (benchmarks/tune_rig.py): a move on extrapolation now waits for
    MIN_WINDOW_STEPS decode steps after the one before."""
    from server_control.advice.store import add
    from server_control.protocol.tuner import MIN_WINDOW_STEPS

    up, _ = curves(3, 0.2, 8000, 0.95, steps=1000)  # speculation only, up to batch 3: blind upward
    assert estimate(up).extrapolated > 2
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=1000, max_step=2))
    tuner.observe(0.0, cc.Curves(32, 0, ()), 3)
    first = tuner.observe(5.0, up, 3)
    assert first is not None and first.new > 3
    n = first.new
    for t in (10.0, 15.0, 20.0, 25.0):  # no new steps: no second blind move
        assert tuner.observe(t, up, n) is None
    more, _ = curves(3, 0.2, 8000, 0.95, steps=MIN_WINDOW_STEPS + 10, seed=7)
    again = tuner.observe(30.0, add(up, more), n)
    assert again is not None and again.new > n  # measured anew: it may go on
