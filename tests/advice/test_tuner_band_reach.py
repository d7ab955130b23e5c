"""How far one band's win carries N (``measured_reach``) and when N steps past the measured
edge (``_edge_won``), on bands as the estimate gives them. Each case is one the closed-loop
replays (server_control/sim/tune_replay.py) met: a wide band whose steps sat at one end
carried N to its other end, past the best N (the curve of best N 13 from 60: 17 -> 8; of best
N 56 from 48: 50 -> 58), and a band leading by 5.7 % at 7 se stepped N past the edge of a
crossover it was 0.6-4 % from (56 -> 58)."""

from __future__ import annotations

from server_control.protocol.bands import Band
from server_control.protocol.crossover import Estimate
from server_control.protocol.tuner import _edge_won, measured_reach


def _est(*bands: Band) -> Estimate:
    return Estimate((), None, None, None, "crossover", 0.0, None, None, 0.0, None, tuple(bands))


def test_going_down_a_wide_band_carries_n_only_to_where_its_steps_sat():
    wide = Band(9, 14, speculative=100.0, target_only=110.0, se=1.0, steps=60, batch=13.6)
    assert measured_reach(_est(wide), 14, 1) == 13  # target-only from 14: its steps sat at 13-14, not at 9
    narrow = Band(15, 15, speculative=100.0, target_only=120.0, se=1.0, steps=40, batch=15.0)
    assert measured_reach(_est(narrow, wide), 15, 1) == 13  # through the one-batch band, into the wide one


def test_going_up_an_unclear_band_carries_n_to_its_mean_a_clear_one_through():
    unclear = Band(51, 58, speculative=104.4, target_only=100.0, se=1.4, steps=40, batch=55.3)  # 4.4 %, 3.1 se
    assert measured_reach(_est(unclear), 50, 100) == 55
    clear = Band(51, 58, speculative=130.0, target_only=100.0, se=2.0, steps=40, batch=55.3)
    assert measured_reach(_est(clear), 50, 100) == 58
    after = Band(59, 62, speculative=130.0, target_only=100.0, se=2.0, steps=40, batch=60.0)
    assert measured_reach(_est(unclear, after), 50, 100) == 55  # the unclear band did not speak for 56-58: no further


def test_the_step_past_the_edge_needs_a_lead_clear_of_its_noise():
    near = Band(53, 56, speculative=105.7, target_only=100.0, se=0.79, steps=40, batch=54.0)  # 5.7 %, 7 se
    assert not _edge_won(_est(near), 56, 100)  # 5.7 - 2 x 0.79 = 4.1 % < 5 %
    sure = Band(53, 56, speculative=108.0, target_only=100.0, se=1.0, steps=40, batch=54.0)
    assert _edge_won(_est(sure), 56, 100)  # 8 - 2 = 6 % >= 5 %
