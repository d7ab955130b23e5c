"""The tuner in closed loop on the simulator's three GPU-shaped curves (flat while
weight-bound, then linear in the step's tokens; best N 13, 56 and beyond the running cap
64), replayed in simulated time (server_control/sim/tune_replay.py): from a start, N comes
within one bucket of the best N by 10 simulated minutes and stays there, with at most 2
reversals. From every start of ``tune_replay.STARTS`` (2 to 60), at seed 0; each replay is 12
simulated minutes (about 2 s of CPU). More seeds over 30 minutes are a script's
(``python -m server_control.sim.tune_replay --seeds 6``; docs/advice.md has its count)."""

from __future__ import annotations

import pytest

from server_control.protocol import cost_curves
from server_control.sim.tune_replay import GPU_CURVES, RUNNING_CAP, STARTS, replay

MINUTES = 12.0
GOAL_MIN = 10.0
MAX_REVERSALS = 2
CASES = [pytest.param(i, start) for i in range(len(GPU_CURVES)) for start in STARTS]


def test_the_three_curves_have_the_best_n_the_issue_names():
    assert [c.best_n() for c in GPU_CURVES] == [13, 56, RUNNING_CAP]
    assert cost_curves.tuned_cap(RUNNING_CAP) == RUNNING_CAP  # one bucket = one batch up to the cap


@pytest.mark.parametrize("curve, start", CASES)
def test_from_any_start_n_settles_within_one_bucket_in_ten_minutes_with_few_reversals(curve, start):
    r = replay(GPU_CURVES[curve], start, MINUTES)
    settled = r.settled_min()
    assert settled is not None and settled <= GOAL_MIN, (r.best, r.path)
    assert r.reversals <= MAX_REVERSALS, (r.reversals, r.path)
