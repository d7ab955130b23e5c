"""Switch rate and flapping: how often the threshold rule changed the mode lately and, when
that is too often, which setting to change (one suggestion, applied and read back like N).

Switching itself is cheap (the patch decides per decode step), but a mode that flips every
few seconds means the batch hovers at N: each switch back re-pays the draft model's
warm-up and the operator cannot read the screen. Two settings damp it:

  hysteresis H   resume speculating only at batch <= max(1, N - H): a wider band; the
                 first choice while N - H > 1 leaves room
  min dwell D    decode steps a mode is held before the next switch: the fallback
                 when the band is already as wide as it gets

Forced switches (the operator's `F`) are not counted. The times are the switches' own (their
log line's time stamp, the patch's ``last_switch.at``), never when an observer read them, so
a console up for hours, a fresh one and `specconsole status` give the same rate. A change of
N, hysteresis or dwell starts a new regime: only the switches after it count, and no
suggestion is made for COOL_DOWN_S after it (the first `H` is judged on what it did, not
on the switches that called for it). Pure: times in, a frozen value out.
"""

from __future__ import annotations

from server_control.model.switch_rate import WINDOW_S, Suggestion, SwitchRate
from server_control.protocol import decision

LIMIT_PER_MIN = 6.0  # more than one switch per 10 s on average is flapping
MIN_SWITCHES = 4  # and never judged on fewer switches than this
MIN_SPAN_S = 60.0  # a console up for 20 s does not extrapolate 3 switches to 9/min
MAX_SUGGESTED_DWELL = 10_000
COOL_DOWN_S = 60.0  # after a change of N / hysteresis / dwell: no new suggestion this soon


def suggest(threshold: int | None, hysteresis: int | None, dwell: int | None) -> Suggestion | None:
    """The next step against flapping: double the hysteresis while the resume band can still
    widen (N - H > 1), else four times the dwell; None when neither can grow or N is unknown."""
    if not threshold or hysteresis is None or dwell is None:
        return None
    low = max(1, threshold - hysteresis)
    if low > 1:
        new_h = min(threshold - 1, max(hysteresis + 1, 2 * hysteresis))
        return Suggestion(
            decision.HYSTERESIS_KEY,
            "hysteresis",
            new_h,
            hysteresis,
            f"resume speculating at batch <= {max(1, threshold - new_h)} instead of <= {low}",
        )
    new_d = min(MAX_SUGGESTED_DWELL, max(dwell + 10, 4 * dwell))
    if new_d <= dwell:
        return None
    return Suggestion(decision.DWELL_KEY, "min dwell", new_d, dwell, f"hold each mode {new_d} decode steps instead of {dwell}")


def switch_rate(
    times: list[float],
    now: float,
    since: float,
    *,
    threshold: int | None,
    hysteresis: int | None,
    dwell: int | None,
    window_s: float = WINDOW_S,
    limit_per_min: float = LIMIT_PER_MIN,
    changed_at: float | None = None,
) -> SwitchRate:
    """``times``: when each rule-made switch happened (epoch seconds, its own time stamp);
    ``since``: the earliest time anything is known from (the run's start or its log's first
    line: the rate is never taken over less than MIN_SPAN_S); ``changed_at``: the last change
    of N, hysteresis or dwell (switches before it do not count; no suggestion for
    COOL_DOWN_S after it). A switch stamped up to 2 s ahead of ``now`` (clock steps) counts."""
    start = max(now - window_s, since, changed_at if changed_at is not None else since)
    recent = [t for t in times if start <= t <= now + 2.0]
    span = max(MIN_SPAN_S, min(window_s, now - start))
    per_min = len(recent) * 60.0 / span
    flapping = len(recent) >= MIN_SWITCHES and per_min > limit_per_min
    cooling = changed_at is not None and now - changed_at < COOL_DOWN_S
    return SwitchRate(
        round(per_min, 1),
        len(recent),
        window_s,
        flapping,
        suggest(threshold, hysteresis, dwell) if flapping and not cooling else None,
    )
