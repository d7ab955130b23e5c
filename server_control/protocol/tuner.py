"""A threshold that follows the measured crossover: the tuner's decisions (pure).

Every ``interval_s`` the tuner estimates (``estimate``) from the cost curves of the last
``window_s`` seconds only (so a phase change is followed; while those hold fewer than
``MIN_WINDOW_STEPS`` decode steps, as on a quiet or slow server, the window reaches back
until they do, at most ``MAX_WINDOW_FACTOR`` windows) and moves N toward the suggestion,
within ``[lo, hi]``:
  * hysteresis: no move while the current N lies inside the suggestion's 95 % interval
    (unless the crossover is extrapolated beyond the data: its interval then says little);
  * bounded rate: at most ``max_step`` per decision, and 1 when the crossover is
    extrapolated beyond the data (one step toward it lets exploration look there), but as
    far as the measurement itself reaches: where both modes were measured (exploration)
    from N on and the same mode won each band, N moves at once as far as those wins speak
    for (``measured_reach``: a wide band's win speaks for where its steps sat);
  * never against the measurement: a move flips the mode of the batches between the old
    and the new N, and it stops before the first of them where both modes were measured
    and the mode it would run there lost (a sign-fit crossover or a line can put N past a
    bucket measured the other way, on noise near a flat optimum);
  * a move on extrapolation (nothing measured where it leads) follows another such move
    only after ``MIN_WINDOW_STEPS`` decode steps at the new N: the same stale window
    stepped N up 17 -> 19 -> 21 -> 23 in 12 s on a slow real server;
  * a reversal (a move against the direction of the last one) waits one more decision that
    asks for it, so N does not swing between neighbours on noise;
  * a phase change is followed: when the mean context of the last interval's steps is
    more than ``CONTEXT_SHIFT`` times (or less than 1/CONTEXT_SHIFT of) the window's, or
    its acceptance (tokens per verified request over the speculative steps, at least
    ``MIN_ACCEPT_VERIFIED`` of them on each side) more than ``ACCEPT_SHIFT`` times (or
    less than 1/ACCEPT_SHIFT of) the window's, the window restarts there: the crossover
    moves with both;
  * one decision for the whole server: the caller (one process, never each rank) applies
    the move as any runtime change is applied, broadcast to every rank.
Each move carries its evidence, the log line
    Dynamic speculation: threshold 8 -> 10 (auto: target-only faster from batch 10,
    412 vs 388 tok/s, n=1234 steps over 30 s)
An operator's explicit N turns the tuner off (``off``) until it is asked again (``on``).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

from server_control.protocol.bands import Band
from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY, Curves
from server_control.protocol.crossover import TRUSTED_EXTRAPOLATION, Estimate, estimate

MOVE_PREFIX = "Dynamic speculation: threshold "
CONTEXT_SHIFT = 2.0
ACCEPT_SHIFT = 1.15  # per-token 0.85 -> 0.6 (3 drafts): 3.2 -> 2.2 tokens per request per verify, 1.45; one phase: 1.01-1.03
MIN_ACCEPT_VERIFIED = 50
DEFAULT_EXPLORE_SHARE = 0.05  # exploration with auto-tune unless the operator sets a share
MAX_COOLDOWN_DOUBLINGS = 4
REVERSAL_MEMORY_S = 1800.0  # reversals this recent lengthen the cool-down after the next
EDGE_MARGIN = 0.05  # ... and steps past the measured edge when it leads there by this share
EDGE_REACH = 2  # ... and only a band whose matched mean batch lies this close to N is its edge (a wide band says little of N)
REACH_Z = 2.0  # a band carries N across it on measurement alone when its winner leads by this many se
MIN_WINDOW_STEPS = 200  # a window of fewer decode steps reaches further back (thin traffic)
MAX_WINDOW_FACTOR = 10  # ... at most this many window_s back
AUTO_TUNE_KEY = "speculative_disable_auto_tune"  # runtime 1 (on) / 0 (off); at start LO-HI
OPERATOR_OFF = "Dynamic speculation: auto-tune off (threshold set to {} by the operator)"


def start_share(given: float | None, auto_tune: bool) -> float:
    """The exploration share a server starts with: the operator's when given, else
    ``DEFAULT_EXPLORE_SHARE`` with auto-tune (the tuner compares the modes where both ran)
    and 0 without."""
    if given is not None:
        return given
    return DEFAULT_EXPLORE_SHARE if auto_tune else 0.0


def validate_switch(value: object) -> bool:
    """The runtime value of ``AUTO_TUNE_KEY``: 1 turns tuning on, 0 off (ValueError else)."""
    if value in (1, 0) and not isinstance(value, str):
        return bool(value)
    raise ValueError(f"{AUTO_TUNE_KEY} must be 1 (on) or 0 (off), got {value!r}")


@dataclass(frozen=True)
class TuneSettings:
    lo: int = 1
    hi: int = 64
    interval_s: float = 5.0
    window_s: float = 30.0
    max_step: int = 2
    cooldown_s: float = 60.0  # no move for this long after a reversal (doubling while they follow each other)

    def __post_init__(self) -> None:
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"auto-tune bounds must satisfy 1 <= lo <= hi, got {self.lo}-{self.hi}")
        if self.interval_s <= 0 or self.window_s <= 0 or self.max_step < 1 or self.cooldown_s < 0:
            raise ValueError("auto-tune interval, window and step must be positive")


def parse_bounds(text: str) -> TuneSettings:
    """``LO-HI`` (e.g. ``2-32``) -> settings; ValueError naming the problem."""
    lo_text, sep, hi_text = text.strip().partition("-")
    try:
        lo, hi = int(lo_text), int(hi_text)
    except ValueError:
        raise ValueError(f"auto-tune bounds must be LO-HI integers, got {text!r}") from None
    if not sep:
        raise ValueError(f"auto-tune bounds must be LO-HI integers, got {text!r}")
    return TuneSettings(lo, hi)


@dataclass(frozen=True)
class Move:
    old: int
    new: int
    evidence: str

    @property
    def line(self) -> str:
        return f"{MOVE_PREFIX}{self.old} -> {self.new} (auto: {self.evidence})"


def evidence(e: Estimate, busy_s: float) -> str:
    n = sum(p.steps for p in e.points)
    span = f"n={n} steps over {busy_s:.0f} s"
    if e.crossover is None:
        return f"speculation faster at every measured batch, {span}"
    b = e.crossover
    t, s = e.tok_s(TARGET_ONLY, b), e.tok_s(SPECULATIVE, b)
    band = next((d for d in e.bands if d.lo <= b <= d.hi), None)
    if band is not None:  # both measured there at matching batches: the measurement
        t, s = band.target_only, band.speculative
    nums = f", {t:.0f} vs {s:.0f} tok/s" if t is not None and s is not None else ""
    return f"target-only faster from batch {b}{nums}, {span}"


class Tuner:
    def __init__(self, settings: TuneSettings) -> None:
        self.settings = settings
        self.on = True
        self.off_reason: str | None = None
        self.moves = 0
        self.last_move: Move | None = None
        self._history: collections.deque[tuple[float, Curves]] = collections.deque()
        self._last_decision: float | None = None
        self._direction = 0  # of the last move: +1 up, -1 down
        self._reversal_asked = False
        self._reversals: collections.deque[float] = collections.deque()  # when, the recent ones
        self._hold_until: float | None = None
        self._blind_from: int | None = None  # decode steps counted at the last extrapolated move

    def off(self, reason: str) -> None:
        self.on, self.off_reason = False, reason

    def turn_on(self) -> None:
        self.on, self.off_reason = True, None
        self._history.clear()
        self._last_decision = None
        self._direction, self._reversal_asked = 0, False
        self._reversals.clear()
        self._hold_until = None
        self._blind_from = None

    def observe(self, now: float, curves: Curves, threshold: int, exploring: bool = False) -> Move | None:
        """A reading of the cumulative curves at ``now`` (seconds); a Move or None.
        ``exploring``: the server explores (a share > 0): an extrapolated suggestion with no
        band measured in the window waits for exploration's bands instead of stepping blind."""
        if not self.on:
            return None
        self._history.append((now, curves))
        kept = self.settings.window_s * MAX_WINDOW_FACTOR
        while len(self._history) > 1 and self._history[1][0] <= now - kept:
            self._history.popleft()
        if self._last_decision is None:
            self._last_decision = now
        if now - self._last_decision < self.settings.interval_s:
            return None
        self._last_decision = now
        base_t, base = self._base(now, curves)
        if self._follow_phase(now, curves, base_t, base):
            base_t, base = self._base(now, curves)
        window = curves.minus(base) if base is not curves else curves
        e = estimate(window, split=threshold)
        if e.suggested is None or e.interval is None:
            return None
        lo, hi = e.interval
        far = e.extrapolated > TRUSTED_EXTRAPOLATION
        if lo <= threshold <= hi and not far:
            self._reversal_asked = False
            return None
        if far and self._blind_from is not None and _steps(curves) - self._blind_from < MIN_WINDOW_STEPS:
            return None  # the last move was blind too: its new N has not been measured yet
        target = min(self.settings.hi, max(self.settings.lo, e.suggested or self.settings.hi))
        new = self._toward(e, threshold, target, far, exploring)
        if new == threshold:
            return None
        direction = 1 if new > threshold else -1
        if direction == -self._direction and not self._reversal_allowed(now, threshold, target, far, e, new):
            return None
        self._direction, self._reversal_asked = direction, False
        self._blind_from = _steps(curves) if far else None
        move = Move(threshold, new, evidence(e, now - base_t))
        self.moves += 1
        self.last_move = move
        return move

    def _toward(self, e: Estimate, threshold: int, target: int, far: bool, exploring: bool) -> int:
        """The N to move to: a bounded step toward ``target``, never against a measured band.
        An extrapolated ``target`` (far) moves N as far as significant bands carry it where any
        band was measured or the server explores (it measures beyond N soon enough), else by one."""
        reach = measured_reach(e, threshold, target)
        if far and (e.bands or exploring):
            if reach is not None and _measured_beyond(e, threshold, target):
                new = reach
            elif _edge_won(e, threshold, target):  # won at N's edge, nothing measured beyond: look there
                new = threshold + (self.settings.max_step if target > threshold else -self.settings.max_step)
                new = min(new, target) if target > threshold else max(new, target)
            else:
                new = threshold
        else:
            step = 1 if far else self.settings.max_step
            new = threshold + max(-step, min(step, target - threshold))
            if reach is not None:
                new = max(new, reach) if target > threshold else min(new, reach)
        return measured_limit(e, threshold, new)

    def _reversal_allowed(self, now: float, threshold: int, target: int, far: bool, e: Estimate, new: int) -> bool:
        """A reversal goes only on measurement (never an extrapolation: a band among the
        batches it flips won by ``REACH_Z`` standard errors by the mode it gives them), toward
        a suggestion more than a bucket away, asked by two decisions in a row, and not while
        the cool-down of the last one lasts (``cooldown_s``, doubled for each reversal in the
        last ``REVERSAL_MEMORY_S``)."""
        lo, hi = min(threshold, new), max(threshold, new)
        up = new > threshold
        shown = any(lo < b.hi and b.lo <= hi and (-b.diff if up else b.diff) >= REACH_Z * b.se for b in e.bands)
        if far or not shown or abs(target - threshold) <= 1 or (self._hold_until is not None and now < self._hold_until):
            self._reversal_asked = False
            return False
        if not self._reversal_asked:
            self._reversal_asked = True
            return False
        while self._reversals and self._reversals[0] <= now - REVERSAL_MEMORY_S:
            self._reversals.popleft()
        self._reversals.append(now)
        self._hold_until = now + self.settings.cooldown_s * 2 ** min(len(self._reversals) - 1, MAX_COOLDOWN_DOUBLINGS)
        return True

    def _base(self, now: float, curves: Curves) -> tuple[float, Curves]:
        """The window's start: the last reading at least ``window_s`` old (the oldest kept if
        none is), or, while the window holds fewer than ``MIN_WINDOW_STEPS`` decode steps,
        an older one (thin traffic), at most ``MAX_WINDOW_FACTOR`` windows back."""
        history = self._history
        i = 0
        while i + 1 < len(history) and history[i + 1][0] <= now - self.settings.window_s:
            i += 1
        total = _steps(curves)
        while i > 0 and total - _steps(history[i][1]) < MIN_WINDOW_STEPS:
            i -= 1
        return history[i]

    def _follow_phase(self, now: float, curves: Curves, base_t: float, base: Curves) -> bool:
        """Restart the window (True) where the mean context or the acceptance of the last
        interval left the window's (from ``base``)."""
        if len(self._history) < 3:
            return False
        recent_t, recent = next(
            ((t, c) for t, c in reversed(self._history) if base_t <= t <= now - self.settings.interval_s), (base_t, base)
        )
        last, before = curves.minus(recent), recent.minus(base)
        if _shifted(_mean_context(last), _mean_context(before), CONTEXT_SHIFT) or _shifted(
            _mean_accept(last), _mean_accept(before), ACCEPT_SHIFT
        ):
            while self._history[0][0] < recent_t:
                self._history.popleft()
            return True
        return False

    def snapshot(self) -> dict[str, object]:
        s = self.settings
        m = self.last_move
        return {
            "on": self.on,
            "off_reason": self.off_reason,
            "bounds": [s.lo, s.hi],
            "interval_s": s.interval_s,
            "window_s": s.window_s,
            "max_step": s.max_step,
            "cooldown_s": s.cooldown_s,
            "moves": self.moves,
            "last_move": {"old": m.old, "new": m.new, "evidence": m.evidence} if m else None,
        }


def _shifted(new: float | None, old: float | None, factor: float) -> bool:
    return new is not None and old is not None and new > 0 and old > 0 and max(new / old, old / new) > factor


def _mean_accept(curves: Curves) -> float | None:
    """Tokens per request per verified speculative step (each bucket's tokens over its
    verifies times its mean batch: the batch mix does not move it); None below
    MIN_ACCEPT_VERIFIED verifies."""
    rows = [b for b in curves.buckets if b.mode == SPECULATIVE and b.verified > 0 and b.mean_batch > 0]
    verified = sum(b.verified for b in rows)
    return sum(b.tokens / b.mean_batch for b in rows) / verified if verified >= MIN_ACCEPT_VERIFIED else None


def _steps(curves: Curves) -> int:
    return sum(b.steps for b in curves.buckets)


def _mean_context(curves: Curves) -> float | None:
    rows = [(b.context_sum, b.steps) for b in curves.buckets if b.context_sum is not None and b.steps > 0]
    steps = sum(n for _c, n in rows)
    return sum(c for c, _n in rows) / steps if steps else None


def _edge_won(e: Estimate, threshold: int, target: int) -> bool:
    """Whether the band at N's edge (the one holding N + 1 going up, else the nearest at or
    below N) was won by the mode the move gives more batches, by ``REACH_Z`` standard errors
    and ``EDGE_MARGIN`` of throughput, with no band beyond it: the crossover lies further
    than anything measured, and not just beyond (a flat optimum's margins are smaller)."""
    below = [b for b in e.bands if b.lo <= threshold]
    edge = max(below, key=lambda b: b.lo) if below else None
    if target > threshold:
        edge = next((b for b in e.bands if b.lo <= threshold + 1 <= b.hi), edge)
    if edge is None or (edge.batch or edge.hi) < threshold - EDGE_REACH:
        return False
    lead = -edge.diff if target > threshold else edge.diff
    if lead - REACH_Z * edge.se < EDGE_MARGIN * min(edge.speculative, edge.target_only):
        return False
    if target > threshold:
        return not any(b.lo > edge.hi for b in e.bands)
    return not any(b.hi < edge.lo for b in e.bands)


def _measured_beyond(e: Estimate, threshold: int, target: int) -> bool:
    """Whether a band lies on the far side of N toward ``target`` (measurement, not a guess)."""
    if target > threshold:
        return any(b.hi > threshold for b in e.bands)
    return any(b.lo <= threshold for b in e.bands)


def measured_limit(e: Estimate, threshold: int, new: int) -> int:
    """``new``, or the N nearest it on the way from ``threshold`` before the first band of
    batches the move would flip (to speculation going up, to target-only going down) where
    both modes were measured at matching batches and the mode it would run there was slower."""
    if new > threshold:
        for b in sorted(e.bands, key=lambda b: b.lo):
            if b.hi > threshold and b.lo <= new and b.speculative < b.target_only:
                return max(threshold, b.lo - 1)
    else:
        for b in sorted(e.bands, key=lambda b: b.hi, reverse=True):
            if b.lo <= threshold and b.hi > new and b.target_only < b.speculative:
                return min(threshold, b.hi)
    return new


def measured_reach(e: Estimate, threshold: int, target: int) -> int | None:
    """How far N may move toward ``target`` on measurement alone: along the unbroken run of
    bands (both modes at matching batches), from N's side of the boundary on, where the same
    mode won by ``REACH_Z`` se (speculation going up, target-only going down), as far as each
    band's win speaks for, and on into the next band only where it spoke for the whole band.
    A band's win speaks for its batches as far as its matched mix's mean batch (its steps sat
    there: a wide band can hold the crossover), and going up for all of them when it was won
    clearly (``EDGE_MARGIN``). Going down a clear win is not enough: below a crossover the
    lead can grow 7 % a batch (the curve of best N 13), so a wide band's lead says little of
    its lowest batches. None if no band carries N."""
    reach = None
    if target > threshold:
        for b in sorted((b for b in e.bands if b.hi > threshold), key=lambda b: b.lo):
            if -b.diff < REACH_Z * b.se or b.lo > (threshold if reach is None else reach) + 1:
                break
            reach = min(b.hi if _clear(b) else _spoken_hi(b), target)
    elif target < threshold:
        for b in sorted((b for b in e.bands if b.lo <= threshold), key=lambda b: b.lo, reverse=True):
            if b.diff < REACH_Z * b.se or b.hi < (threshold if reach is None else reach):
                break
            reach = max(_spoken_lo(b) - 1, target)
    return reach


def _clear(b: Band) -> bool:
    """Whether a band's winner leads by ``EDGE_MARGIN`` of throughput: the crossover then does not lie inside it."""
    return abs(b.diff) >= EDGE_MARGIN * min(b.speculative, b.target_only)


def _spoken_hi(b: Band) -> int:
    """The highest batch a band's win speaks for: its last, or, for a band whose matched mix
    sat lower (a wide band of sparse batches), the batch its mean lies in."""
    return min(b.hi, max(b.lo, math.floor(b.batch))) if b.batch > 0 else b.hi


def _spoken_lo(b: Band) -> int:
    """The lowest batch a band's win speaks for: its first, or where its matched mix's mean lies."""
    return max(b.lo, min(b.hi, math.ceil(b.batch))) if b.batch > 0 else b.lo
