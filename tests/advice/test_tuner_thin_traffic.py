"""Thin traffic: a tuner window of fewer than ``MIN_WINDOW_STEPS`` decode steps reaches
further back (at most ``MAX_WINDOW_FACTOR`` windows), so a slow or quiet server decides on
enough steps instead of on noise. On the loaded CPU rig (tp 2, three times slower than
idle) the last 30 s held 56 steps: the tuner moved N the wrong way on them, and on CI's
machine it made no move in 240 s of traffic. Ample traffic keeps the 30 s window."""

import re

from server_control.advice.store import add
from server_control.protocol import cost_curves as cc
from server_control.protocol.tuner import MIN_WINDOW_STEPS, Tuner, TuneSettings
from tests.support.advice import curves


def _spans(steps_per_reading: int) -> list[tuple[int, int]]:
    """(steps in the decision's estimate, seconds its window spans) of each move: one
    reading every 5 s, each adding ``steps_per_reading`` steps, N far above the truth."""
    tuner = Tuner(TuneSettings(1, 32, interval_s=5, window_s=30, max_step=2))
    total, out = cc.Curves(32, 0, ()), []
    for k in range(25):
        piece, truth = curves(12, 0.2, 4000, 0.9, lo=6, hi=16, steps=steps_per_reading, share=0.1, seed=k + 1)
        total = add(total, piece)
        move = tuner.observe(5.0 * k, total, 16 if k >= 12 else truth)
        if move is not None and k >= 12:
            m = re.search(r"n=(\d+) steps over (\d+) s\)$", move.line)
            assert m is not None, move.line
            out.append((int(m.group(1)), int(m.group(2))))
    return out


def test_a_thin_window_reaches_back_until_it_holds_enough_steps():
    spans = _spans(25)  # ~150 timed steps in 30 s
    assert spans, "no move on thin traffic"
    assert all(span > 30 for _n, span in spans), spans
    assert all(n >= 0.8 * MIN_WINDOW_STEPS for n, _span in spans), spans  # the estimate's own steps (buckets with enough)


def test_ample_traffic_keeps_the_window():
    spans = _spans(400)
    assert spans and all(span == 30 for _n, span in spans), spans
