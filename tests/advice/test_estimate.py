"""The advisor's estimate and words on curves drawn from the simulator's model (pure)."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from server_control.advice.words import advise, duration
from server_control.protocol import crossover
from server_control.protocol.cost_curves import SPECULATIVE
from server_control.protocol.crossover import estimate
from server_control.protocol.explore import Explorer, window
from server_control.sim import model
from tests.support.advice import curves


@pytest.mark.parametrize("n, kv, ctx, p", [(8, 0.0, 500, 0.777), (2, 0.0, 500, 0.777), (6, 0.2, 4000, 0.9), (12, 0.2, 4000, 0.9)])
def test_with_exploration_the_crossover_is_found_within_one_bucket(n, kv, ctx, p):
    got, truth = curves(n, kv, ctx, p, share=0.1)
    e = estimate(got)
    assert e.crossover is not None and abs(e.crossover - truth) <= 1, (e.crossover, truth)
    assert e.suggested == e.crossover - 1
    lo, hi = e.interval
    assert lo <= e.suggested <= hi


def test_without_exploration_far_from_the_truth_it_says_it_extrapolates():
    got, truth = curves(12, 0.2, 4000, 0.9)  # truth 9, N = 12: no speculative data above 12
    e = estimate(got)
    assert e.extrapolated > 2
    adv = advise(e, 12)
    assert "extrapolated" in adv.sentence and not adv.confident


def test_the_sentence_names_the_gain_the_batches_the_duration_and_the_interval():
    got, _truth = curves(8, share=0.1)
    e = estimate(got)
    adv = advise(e, 8)
    lo, hi = adv.interval
    iv = f"{lo}-{hi}" if lo != hi else f"{lo}"
    assert adv.sentence == (
        f"N={e.suggested} would give {adv.gain * 100:+.0f}% at batch "
        f"{e.suggested + 1}-8 (measured over {duration(e.busy_seconds)}, 95% interval {iv})"
    )
    assert adv.gain > 0.05 and adv.confident
    right = advise(e, e.suggested)
    assert right.sentence.startswith(f"N={e.suggested} is right") and not right.confident


def test_not_enough_data_says_what_is_missing():
    got, _ = curves(30, steps=500)  # every batch <= 30: never target-only
    e = estimate(got)
    assert e.verdict == "insufficient" and "no target-only steps" in e.missing
    assert advise(e, 30).sentence.startswith("not enough data yet: no target-only steps")


def test_the_estimate_is_deterministic_and_acceptance_and_context_are_reported():
    got, _ = curves(8, ctx=1200.0, share=0.1)
    a, b = estimate(got), estimate(got)
    assert a == b
    assert a.accept_length == pytest.approx(model.DEFAULT.accept_length, rel=0.05)
    assert a.mean_context == pytest.approx(1200.0)


def test_exploration_flips_a_bounded_share_near_n_only():
    ex = Explorer(0.02)
    flips = sum(ex.mode("speculative", i, 8, 8) != "speculative" for i in range(100000))
    assert 1800 <= flips <= 2200
    assert all(ex.mode("speculative", i, 8 - window(8), 8) == "speculative" for i in range(5000))
    assert all(ex.mode("target_only", i, 9 + window(8), 8) == "target_only" for i in range(5000))
    assert all(ex.mode("speculative", i, 8, 8, auto=False) == "speculative" for i in range(5000))
    assert not any(Explorer(0.0).mode("speculative", i, 8, 8) != "speculative" for i in range(5000))
    other, third = Explorer(0.02), Explorer(0.02)  # two more ranks: the same steps flip
    assert [other.mode("speculative", i, 7, 8) for i in range(3000)] == [third.mode("speculative", i, 7, 8) for i in range(3000)]
    with pytest.raises(ValueError, match="0..0.1"):
        Explorer(0.5)


def test_exploration_learns_fast_after_n_changes_then_falls_back_to_its_share():
    ex = Explorer(0.02)
    first = [ex.mode("speculative", i, 9, 8) != "speculative" for i in range(200)]
    assert sum(first) >= 10  # 2% of 200 steps would be 4
    assert sum(first[:150]) >= 10  # at about a fifth of the steps
    later = sum(ex.mode("speculative", i, 9, 8) != "speculative" for i in range(200, 100200))
    assert 1800 <= later <= 2200  # learnt: back to the share
    moved = [ex.mode("speculative", i, 9, 7) != "speculative" for i in range(100200, 100400)]
    assert sum(moved) >= 10  # N changed: batch 9 learns again
    assert not any(Explorer(0.0).mode("speculative", i, 9, 8) != "speculative" for i in range(500))
    a, b = Explorer(0.02), Explorer(0.02)  # two ranks: the same steps flip, learning included
    seq = [(i, 5 + i % 7, 6 + (i // 300) % 3) for i in range(3000)]
    assert [a.mode("speculative", i, bs, n) for i, bs, n in seq] == [b.mode("speculative", i, bs, n) for i, bs, n in seq]


def _bucket(mode, b, step_ms, tokens_per_step, n=100):
    from server_control.protocol.cost_curves import Bucket

    t, k = step_ms / 1000, tokens_per_step
    return Bucket(mode, b, b, n, n * t, n * t * t, n * b, n, n * k, n * k * k, None)


def test_speculation_faster_at_every_batch_is_never_called_target_only_wins():
    # seen on the CPU rig (benchmarks/advise_rig, 2026-12-02): speculation 2-3x faster at
    # every batch both modes ran, but a target-only line through the origin (intercept
    # <= a third of speculation's) gave d < 0 and c < 0, read as "target-only wins
    # everywhere": N=1 "would give -40% at batch 2-8"
    from server_control.protocol.cost_curves import Curves

    spec = {b: 8.0 + 2.4 * b for b in range(1, 15)}
    tgt = {b: 4.0 * b for b in range(5, 17)}  # 250 tok/s at every batch
    got = Curves(
        32,
        0,
        tuple(_bucket("speculative", b, ms, 3 * b) for b, ms in spec.items())
        + tuple(_bucket("target_only", b, ms, b) for b, ms in tgt.items()),
    )
    e = estimate(got)
    assert all(e.tok_s("speculative", b) > e.tok_s("target_only", b) for b in range(1, 17))
    assert e.verdict == "speculation_wins" and e.suggested == 0, (e.verdict, e.crossover)
    assert e.interval == (0, 0)


def _sign_step_by_brute_force(zs: list[float]) -> int:
    """The c minimising the sum of max(0, z) below c and max(0, -z) from c (the module doc),
    every c summed afresh: the one-pass search must find the same."""
    best, best_cost = len(zs), float("inf")
    for c in range(len(zs) + 1):
        cost = sum(max(0.0, z) for z in zs[:c]) + sum(max(0.0, -z) for z in zs[c:])
        if cost < best_cost - 1e-9:
            best, best_cost = c, cost
    return best


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(-40, 40), min_size=2, max_size=30))
def test_the_one_pass_sign_step_is_the_brute_force_one(tenths: list[int]) -> None:
    zs = [t / 10 for t in tenths]  # z = diff / se with se 1: exact sums, no rounding ties
    pairs = [(lo, z, 1.0, lo, float(lo)) for lo, z in enumerate(zs, start=1)]  # one batch a band
    best = _sign_step_by_brute_force(zs)
    got = crossover._measured(pairs)
    if best == len(zs):
        assert got is None
    else:
        assert got is not None and got[1] == best + 1, (zs, best, got)
    drawn = crossover._measured(pairs, [2 * z for z in zs])  # a draw: the same search on its values
    assert (drawn is None) == (got is None)
    if drawn is not None and got is not None:
        assert drawn[1] == got[1]


_POINT = st.tuples(
    st.floats(1.0, 64.0), st.integers(8, 400), st.floats(1e-3, 2.0), st.floats(0.0, 8.0)
)  # batch, steps, step seconds, tokens per step


@settings(max_examples=500, deadline=None)
@given(st.lists(_POINT, min_size=1, max_size=12), st.floats(-0.5, 0.5))
@example([(4.0, 50, 0.04, 3.0)], 0.0)  # one point: held flat
@example([(1.0, 10, 0.01, 1.0), (10.0, 10, 0.5, 1.0), (20.0, 10, 2.0, 1.0)], 0.0)  # intercept < 0
def test_a_bootstraps_line_is_the_point_fits_to_the_last_bit(rows, tilt) -> None:
    """The bootstrap's lines (``_Design`` once, ``_fit_drawn`` per draw) are ``_fit``'s,
    float for float: one point (held flat), a fitted slope, a line through the origin's side
    (``tilt``: step times falling with the batch drive the intercept below zero)."""
    rows = [(b, n, max(1e-4, t + tilt * b), k) for b, n, t, k in rows]
    points = tuple(crossover.Point(SPECULATIVE, i, i, b, n, t, 0.0, k, 0.0, 0.0, 0.0) for i, (b, n, t, k) in enumerate(rows))
    design = crossover._Design(points, list(range(len(points))))
    drawn = crossover._fit_drawn(design, {i: (t, k) for i, (_b, _n, t, k) in enumerate(rows)})
    assert repr(drawn) == repr(crossover._fit(rows))


def test_a_band_spanning_the_crossover_places_it_where_the_difference_crosses_zero():
    """Bands group batches until each mode has its steps; one can span the crossover. The
    sign step gives target-only that band, and its first batch alone put the crossover up to
    a band too early (the tuner settled at N=11 where the best N was 13)."""
    pairs = [(8, -130.0, 10.0, 11, 9.5), (12, 32.0, 10.0, 15, 13.5), (16, 113.0, 10.0, 19, 17.5)]
    got = crossover._measured(pairs)
    # zero of the line through (9.5, -130) and (13.5, 32): 9.5 + 4 * 130 / 162 = 12.7 -> 13
    assert got is not None and got[1] == 13
    # never before the band (speculation won up to 11): a zero at 9.5 + 4 * 5 / 505 = 9.54
    assert crossover._measured([(8, -5.0, 1.0, 11, 9.5), (12, 500.0, 1.0, 15, 13.5)])[1] == 12
    # a close win in the band puts it near the band's mean batch: 9.5 + 4 * 500 / 505 = 13.46
    assert crossover._measured([(8, -500.0, 1.0, 11, 9.5), (12, 5.0, 1.0, 15, 13.5)])[1] == 14
    # one batch a band: the band's own batch, as before
    assert crossover._measured([(11, -50.0, 1.0, 11, 11.0), (12, 50.0, 1.0, 12, 12.0)])[1] == 12


def test_target_only_winning_only_beyond_a_gap_above_n_is_a_guess_not_a_measurement():
    """At N=14, target-only won the one band both modes ran (20-21) and nothing was compared
    at 15-19: a crossover at 20 read as measured moved N up 14 -> 16 -> 18, flipping batches
    to speculation where target-only was faster (best N 13). Between N and that band the
    crossover is extrapolated, as far as the gap."""
    from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY, CostCounters, parse

    c = CostCounters(64)
    t = 0.0
    for batch in range(10, 15):  # speculation alone at or below N
        for _ in range(40):
            c.step(SPECULATIVE, batch, t, 500.0)
            t += 0.1
            c.commit(SPECULATIVE, batch, 3 * batch)
    for batch in range(15, 22):  # target-only alone above N (flat: weight-bound) ...
        for _ in range(40):
            c.step(TARGET_ONLY, batch, t, 500.0)
            t += 0.038
            c.commit(TARGET_ONLY, batch, batch)
    for batch, step_s in ((20, 0.12), (21, 0.13)):  # ... and both only at 20-21: target-only won
        for _ in range(10):
            c.step(SPECULATIVE, batch, t, 500.0)
            t += step_s
            c.commit(SPECULATIVE, batch, 3 * batch)
    c.idle()
    e = estimate(parse(c.snapshot()), split=14)
    assert e.bands and e.bands[0].lo == 20 and e.bands[0].diff > 0
    assert e.crossover is not None and e.crossover > 15
    assert e.extrapolated > crossover.TRUSTED_EXTRAPOLATION, e


@pytest.mark.parametrize("n, steps, seed, share, hi", [(2, 400, 3, 0.0, 20), (6, 100, 3, 0.05, 20), (8, 100, 1, 0.1, 20)])
def test_the_95_interval_always_holds_the_suggested_n(n, steps, seed, share, hi):
    """Early curves (100-400 steps): the console showed N=538 with "95% interval 0-284" (a
    percentile interval of a crossover extrapolated from near-parallel lines), and N=3 with
    "95% interval 0" (the bootstrap left out the one-band rule the point used)."""
    got, _ = curves(n, steps=steps, seed=seed, share=share, hi=hi)
    e = estimate(got)
    assert e.suggested is not None
    lo, hi_n = e.interval
    assert lo <= e.suggested <= hi_n, (e.suggested, e.interval, e.verdict)


def test_the_cold_caveat_is_said_only_where_the_mark_can_apply_near_n():
    """With the cold-draft mark at or below the interval's top, the advice says that its
    target-only curve near N holds warm steps; at 0 (warm) or above the interval, nothing."""
    from server_control.advice.words import advise, with_cold_caveat
    from server_control.protocol.crossover import estimate
    from tests.support.advice import curves

    adv = advise(estimate(curves(4, share=0.1)[0]), 8)
    assert adv.interval is not None, adv.sentence
    lo, hi = adv.interval
    assert with_cold_caveat(adv, 0) == adv and with_cold_caveat(adv, hi + 1) == adv
    said = with_cold_caveat(adv, hi).sentence
    assert said.startswith(adv.sentence) and f"(the cold-draft mark is {hi}: " in said, said
    assert with_cold_caveat(adv, 1).sentence != adv.sentence
