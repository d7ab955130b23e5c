"""A phase that changes acceptance alone (same context length) restarts the tuner's window,
as a context shift does: the crossover moves with acceptance, and a 30 s window would mix
the two phases until it slid past the change. Acceptance as noisy as one phase's own
spread does not restart it."""

from server_control.advice.store import add
from server_control.protocol import cost_curves as cc
from server_control.protocol.tuner import Tuner, TuneSettings
from tests.support.advice import curves

EMPTY = cc.Curves(32, 0, ())


def _tuner() -> Tuner:
    return Tuner(TuneSettings(1, 32, interval_s=5, window_s=1000, max_step=2))


def test_an_acceptance_shift_alone_restarts_the_window():
    high, _ = curves(8, 0.0, 500, 0.95, share=0.1, seed=1)  # speculation wins further up
    low, _ = curves(8, 0.0, 500, 0.5, share=0.1, seed=2)  # the same context, acceptance 0.5
    tuner = _tuner()
    tuner.observe(0.0, EMPTY, 8)
    on_high = tuner.observe(5.0, high, 8)
    assert on_high is not None and on_high.new == 6  # what the high-acceptance steps ask
    both = add(high, low)
    moves = [tuner.observe(10.0, both, 8)]  # the last 5 s: 1.9 tokens per request per verify against 3.7 before
    assert tuner._history[0][1] is high  # the window now starts at the shift
    moves.append(tuner.observe(15.0, both, 8))
    # decided on the low-acceptance steps alone (below what the high ones asked), once
    assert [m.new < 6 for m in moves if m is not None] == [True], moves


def test_the_same_acceptance_does_not_restart_the_window():
    a, _ = curves(8, 0.0, 500, 0.777, share=0.1, seed=1)
    b, _ = curves(8, 0.0, 500, 0.777, share=0.1, seed=2)  # another draw of the same phase
    tuner = _tuner()
    tuner.observe(0.0, EMPTY, 8)
    tuner.observe(5.0, a, 8)
    tuner.observe(10.0, add(a, b), 8)
    assert tuner._history[0][1] is EMPTY  # the window still starts at the beginning
