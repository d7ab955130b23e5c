"""Switch rate, the flapping verdict and the suggestion against it."""

from __future__ import annotations

from server_control.protocol import decision
from server_control.telemetry.flapping import suggest, switch_rate


def test_demo_switching_every_6_s_is_flapping_and_widens_the_band_first():
    now = 1000.0
    times = [now - 6.0 * i for i in range(20)]  # the issue: hysteresis 1, a switch every ~6 s
    rate = switch_rate(times, now, since=0.0, threshold=5, hysteresis=1, dwell=10)
    assert rate.flapping and rate.per_min == 10.0 and rate.count == 20
    assert (rate.suggestion.key, rate.suggestion.value) == (decision.HYSTERESIS_KEY, 2)
    assert rate.suggestion.describe() == "hysteresis 1 -> 2 (resume speculating at batch <= 3 instead of <= 4)"


def test_load_following_is_not_flapping():
    now = 1000.0
    times = [now - 30.0 * i for i in range(4)]  # the demo at time scale 1: two crossings a minute
    rate = switch_rate(times, now, since=0.0, threshold=5, hysteresis=1, dwell=10)
    assert not rate.flapping and rate.suggestion is None and rate.per_min == 2.0


def test_a_young_console_does_not_extrapolate():
    now = 1000.0
    rate = switch_rate([now - 1, now - 5, now - 9], now, since=now - 10, threshold=5, hysteresis=1, dwell=10)
    assert not rate.flapping and rate.per_min == 3.0  # 3 switches over at least a minute


def test_suggestions_escalate_then_stop():
    assert suggest(5, 2, 10).value == 4  # N - H = 3 > 1: double H, capped at N - 1
    dwell = suggest(5, 4, 10)  # the band is as wide as it gets (resume <= 1)
    assert (dwell.key, dwell.value) == (decision.DWELL_KEY, 40)
    assert suggest(1, 1, 10).key == decision.DWELL_KEY  # N = 1: hysteresis cannot help
    assert suggest(0, 1, 10) is None and suggest(None, 1, 10) is None  # never disabled / unknown
    assert suggest(5, 4, 10_000) is None  # nothing left to grow
