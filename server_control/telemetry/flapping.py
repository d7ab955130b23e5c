"""Switch rate and flapping: how often the threshold rule changed the mode lately and, when
that is too often, which setting to change (one suggestion, applied and read back like N).

Switching itself is cheap (the patch decides per decode step), but a mode that flips every
few seconds means the batch hovers at N: each switch back re-pays the draft model's
warm-up and the operator cannot read the screen. Two settings damp it:

  hysteresis H   resume speculating only at batch <= max(1, N - H): a wider band; the
                 first choice while N - H > 1 leaves room
  min dwell D    decode steps a mode is held before the next switch: the fallback
                 when the band is already as wide as it gets

Forced switches (the operator's `F`) are not counted. Pure: times in, a frozen value out.
"""
from __future__ import annotations

from server_control.model.switch_rate import WINDOW_S, Suggestion, SwitchRate
from server_control.protocol import decision as d

LIMIT_PER_MIN = 6.0     # more than one switch per 10 s on average is flapping
MIN_SWITCHES = 4        # and never judged on fewer switches than this
MIN_SPAN_S = 60.0       # a console up for 20 s does not extrapolate 3 switches to 9/min
MAX_SUGGESTED_DWELL = 10_000


def suggest(threshold: int | None, hysteresis: int | None, dwell: int | None) -> Suggestion | None:
    """The next step against flapping: double the hysteresis while the resume band can still
    widen (N - H > 1), else four times the dwell; None when neither can grow or N is unknown."""
    if not threshold or hysteresis is None or dwell is None:
        return None
    low = max(1, threshold - hysteresis)
    if low > 1:
        new_h = min(threshold - 1, max(hysteresis + 1, 2 * hysteresis))
        return Suggestion(d.HYSTERESIS_KEY, "hysteresis", new_h, hysteresis,
                          f"resume speculating at batch <= {max(1, threshold - new_h)} instead of <= {low}")
    new_d = min(MAX_SUGGESTED_DWELL, max(dwell + 10, 4 * dwell))
    if new_d <= dwell:
        return None
    return Suggestion(d.DWELL_KEY, "min dwell", new_d, dwell,
                      f"hold each mode {new_d} decode steps instead of {dwell}")


def switch_rate(times: list[float], now: float, since: float, *, threshold: int | None,
                hysteresis: int | None, dwell: int | None, window_s: float = WINDOW_S,
                limit_per_min: float = LIMIT_PER_MIN) -> SwitchRate:
    """``times``: when each rule-made switch was seen (epoch seconds); ``since``: when
    watching began (the rate is never taken over less than MIN_SPAN_S)."""
    recent = [t for t in times if 0.0 <= now - t <= window_s]
    span = max(MIN_SPAN_S, min(window_s, now - since))
    per_min = len(recent) * 60.0 / span
    flapping = len(recent) >= MIN_SWITCHES and per_min > limit_per_min
    return SwitchRate(round(per_min, 1), len(recent), window_s, flapping,
                      suggest(threshold, hysteresis, dwell) if flapping else None)
