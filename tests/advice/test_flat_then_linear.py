"""The advisor on a GPU-shaped cost curve: a step's time is flat while reading the weights
bounds it, then linear in the step's tokens. The real CPU rig's crossover pair has this shape
(docs/cpu-rig.md): there the advisor, which had target-only steps only at batches 12-36
(exploration around N=24), fitted target-only's line on that linear part, extrapolated it
down to batch 1 as ever cheaper, and advised N=1, where speculation was twice as fast."""

from __future__ import annotations

import random

from server_control.protocol import cost_curves as cc
from server_control.protocol.crossover import estimate

FLAT_MS, MS_PER_TOKEN, DRAFT_MS, ACCEPT, TOKENS = 80.0, 5.0, 10.0, 2.7, 4


def step_ms(mode: str, batch: int) -> float:
    tokens = batch * (TOKENS if mode == cc.SPECULATIVE else 1)
    return max(FLAT_MS, MS_PER_TOKEN * tokens) + (DRAFT_MS if mode == cc.SPECULATIVE else 0.0)


def truth() -> int:
    """The first batch where target-only out-produces speculation (11 here)."""
    return next(b for b in range(1, 200) if b / step_ms(cc.TARGET_ONLY, b) > ACCEPT * b / step_ms(cc.SPECULATIVE, b))


def gpu_shaped_curves(spec_batches: range, target_batches: range, steps: int = 3000, seed: int = 3) -> cc.Curves:
    rng = random.Random(seed)
    c = cc.CostCounters()
    t = 0.0
    for i in range(steps):
        mode = cc.SPECULATIVE if i % 2 else cc.TARGET_ONLY
        b = rng.choice(spec_batches if mode == cc.SPECULATIVE else target_batches)
        c.step(mode, b, t, 100.0)
        t += step_ms(mode, b) / 1000 * (1 + rng.gauss(0, 0.02))
        c.commit(mode, b, round(ACCEPT * b) if mode == cc.SPECULATIVE else b)
    c.step(cc.SPECULATIVE, 1, t, 100.0)
    return cc.parse(c.snapshot())


def test_target_only_seen_only_where_steps_grow_is_not_extrapolated_below_its_data():
    cross = truth()
    assert cross == 11
    e = estimate(gpu_shaped_curves(range(1, 25), range(12, 37)))
    assert e.crossover is not None and abs(e.crossover - cross) <= 1, (e.crossover, e.verdict, e.suggested)


def test_with_both_modes_everywhere_the_crossover_is_measured():
    e = estimate(gpu_shaped_curves(range(1, 37), range(1, 37)))
    assert e.crossover is not None and abs(e.crossover - truth()) <= 1, (e.crossover, e.verdict)
