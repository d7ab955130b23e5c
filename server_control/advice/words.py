"""The advice as the operator reads it, and as ``specconsole advise --json`` gives it.

    N=12 would give +8% at batch 9-12 (measured over 40 min, 95% interval 10-14)

The gain is the fitted tok/s of the mode the suggestion runs against the mode the current
N runs, averaged over the batches where they differ (current N+1..suggested N when the
suggestion is higher, suggested N+1..current N when lower).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY
from server_control.protocol.crossover import TRUSTED_EXTRAPOLATION, Estimate


@dataclass(frozen=True)
class Advice:
    current: int | None
    suggested: int | None
    interval: tuple[int, int] | None
    gain: float | None  # relative, e.g. 0.08
    batches: tuple[int, int] | None  # where the gain applies
    sentence: str
    confident: bool  # worth applying: data near the crossover, current N outside the interval
    estimate: Estimate
    saved_only: bool = False  # from curves kept on disk: the server was not read (not yet, or no answer)

    def to_json(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "current": self.current,
            "suggested": self.suggested,
            "interval": list(self.interval) if self.interval else None,
            "crossover": e.crossover,
            "verdict": e.verdict,
            "gain": self.gain,
            "batches": list(self.batches) if self.batches else None,
            "sentence": self.sentence,
            "confident": self.confident,
            "saved_only": self.saved_only,
            "extrapolated_batches": round(e.extrapolated, 1),
            "accept_length": e.accept_length,
            "mean_context": e.mean_context,
            "busy_seconds": round(e.busy_seconds, 3),
            "missing": e.missing,
            "curves": [
                {
                    "mode": p.mode,
                    "lo": p.lo,
                    "hi": p.hi,
                    "batch": round(p.batch, 2),
                    "steps": p.steps,
                    "step_ms": round(p.step_s * 1000, 3),
                    "tok_s": round(p.tok_s, 2),
                    "tok_s_se": round(p.tok_s_se, 2),
                }
                for p in e.points
            ],
        }


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _gain(e: Estimate, current: int, suggested: int) -> tuple[float, tuple[int, int]] | None:
    if current == suggested:
        return None
    # N = 0 (never disable) speculates everywhere: compare up to the data's end
    top = max((p.hi or p.lo for p in e.points), default=1)
    cur, sug = (current or top), (suggested or top)
    lo, hi = min(cur, sug) + 1, max(cur, sug)
    if lo > hi:
        return None
    wins, loses = (SPECULATIVE, TARGET_ONLY) if sug > cur else (TARGET_ONLY, SPECULATIVE)
    ratios = []
    for b in range(lo, hi + 1):
        a, c = e.tok_s(wins, b), e.tok_s(loses, b)
        if a is None or c is None or c <= 0:
            return None
        ratios.append(a / c - 1.0)
    return sum(ratios) / len(ratios), (lo, hi)


def advise(e: Estimate, current: int | None) -> Advice:
    over = duration(e.busy_seconds)
    if e.suggested is None or e.interval is None:
        return Advice(current, None, None, None, None, f"not enough data yet: {e.missing} (measured over {over})", False, e)
    lo, hi = e.interval
    span = f"95% interval {lo}-{hi}" if lo != hi else f"95% interval {lo}"
    far = e.extrapolated > TRUSTED_EXTRAPOLATION
    toward = f"nearer N={e.suggested}" if e.suggested else f"above N={current}"
    where = f"; extrapolated {e.extrapolated:.0f} batches beyond the data, explore {toward} to confirm" if far else ""
    if far and current is not None and lo <= current <= hi:
        return Advice(
            current,
            e.suggested,
            e.interval,
            None,
            None,
            f"cannot tell yet whether N={current} is right: suggested N={e.suggested} (measured over {over}, {span}){where}",
            False,
            e,
        )
    if current is not None and lo <= current <= hi:
        return Advice(
            current,
            e.suggested,
            e.interval,
            0.0,
            None,
            f"N={current} is right (suggested N={e.suggested}, measured over {over}, {span}){where}",
            False,
            e,
        )
    got = _gain(e, current, e.suggested) if current is not None else None
    gain, batches = got if got else (None, None)
    word = "N=0 (never disable)" if e.suggested == 0 else f"N={e.suggested}"
    if gain is not None and batches is not None:
        bat = f"batch {batches[0]}" if batches[0] == batches[1] else f"batch {batches[0]}-{batches[1]}"
        text = f"{word} would give {gain * 100:+.0f}% at {bat} (measured over {over}, {span}){where}"
    else:
        text = f"suggested {word} (measured over {over}, {span}){where}"
    return Advice(current, e.suggested, e.interval, gain, batches, text, not far and current is not None, e)


def with_cold_caveat(adv: Advice, cold_draft_above: int) -> Advice:
    """The advice, saying when the server's cold-draft mark can apply near its N: the curves'
    target-only steps near N are explored ones, which keep the draft warm (they sit amid
    speculative steps), while a target-only stretch above the mark skips the draft's extend
    and costs less, so with the draft cold the crossover may lie below the suggestion."""
    if cold_draft_above <= 0 or adv.interval is None or cold_draft_above > adv.interval[1]:
        return adv
    return replace(
        adv,
        sentence=f"{adv.sentence} (the cold-draft mark is {cold_draft_above}: target-only steps above it skip the "
        "draft's extend and cost less than the warm explored ones these curves hold near N, "
        "so with the draft cold the best N may be lower)",
    )
