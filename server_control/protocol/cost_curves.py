"""Per-mode, per-decode-batch-bucket cost counters: what each mode costs at each batch.

Shared by the SGLang patch (``server_control.sglang_patch.curves``) and the simulator, so
both publish the same ``cost_curves`` entry in ``/server_info`` ``dynamic_speculation``
and the same ``sglang:spec_disable_bucket_*`` counters on ``/metrics``. Standard library
only: it is loaded inside SGLang's scheduler processes.

Buckets: exact decode batch sizes 1..cap (default 32), then powers of two (33..64 -> 64,
65..128 -> 128, ... up to 4096, and one last bucket for anything larger). A bucket is
named by its largest batch (``hi``); memory is fixed at construction (2 modes x
``bucket_count(cap)`` slots of 8 numbers).

Per bucket and mode:
  * timed steps, step seconds, step seconds squared, sum of the batch sizes: a decode
    step's duration is the time from its ``step()`` call to the next one (the steady
    step period, as ``SpecSwitch.seconds``); a gap longer than ``max_gap_s`` (an idle
    server, a long prefill) is dropped, counted in ``dropped``.
  * verified steps, committed tokens, committed tokens squared: from ``commit()`` when a
    step's result settles (under SGLang's overlap scheduler one step later), with the
    step's own batch size, in the mode it ran in.
Per step the patch pays one ``step()`` (the clock value the switch already read, a bucket
index from a preallocated table, five adds) and one ``commit()`` (the same index, three adds):
about 0.5 us together at load 9 on a 2-core machine
(benchmarks/curves_bench.py; docs/sglang-patch.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SPECULATIVE = "speculative"
TARGET_ONLY = "target_only"
MODES = (SPECULATIVE, TARGET_ONLY)
DEFAULT_CAP = 32
MAX_TUNED_CAP = 256
TOP = 4096  # the last power-of-two bucket; larger batches share one more
DEFAULT_MAX_GAP_S = 1.0
SNAPSHOT_KEY = "cost_curves"


def tuned_cap(hi: int) -> int:
    """The cap of a tuned server's counters: exact buckets up to the tuner's top bound
    (at least ``DEFAULT_CAP``, at most ``MAX_TUNED_CAP``), so every N it may set is a
    bucket boundary and the modes are compared at the same batch."""
    return max(DEFAULT_CAP, min(hi, MAX_TUNED_CAP))


def bucket_count(cap: int = DEFAULT_CAP) -> int:
    return cap + max(0, TOP.bit_length() - cap.bit_length()) + 1


def bucket_index(batch: int, cap: int = DEFAULT_CAP) -> int:
    """Slot of a decode batch (>= 1): batch - 1 up to cap, then one per power of two."""
    if batch <= cap:
        return batch - 1
    if batch > TOP:
        return bucket_count(cap) - 1
    return cap + (batch - 1).bit_length() - cap.bit_length()


def bucket_bounds(index: int, cap: int = DEFAULT_CAP) -> tuple[int, int]:
    """(lo, hi) decode batches of a slot; the last slot's hi is 0 (unbounded)."""
    if index < cap:
        return index + 1, index + 1
    if index == bucket_count(cap) - 1:
        return TOP + 1, 0
    hi = 1 << (cap.bit_length() + index - cap)
    return max(cap + 1, hi // 2 + 1), hi


class CostCounters:
    """The live counters of one rank (not thread-safe: one scheduler thread writes).

    Storage, all preallocated: one flat list per mode of ``bucket_count(cap)`` x 5 timed-step
    numbers (steps, seconds, seconds squared, batch sum, context sum) and one of x 3
    committed numbers (verified steps, tokens, tokens squared), and a table from batch size
    (0..TOP+1) to slot. A call is a dict lookup, a table lookup and a few list adds; no
    allocation (benchmarks/curves_bench.py)."""

    __slots__ = (
        "cap",
        "max_gap_s",
        "_timed",
        "_done",
        "_slot",
        "_last_t",
        "_last_slot",
        "_last_arr",
        "_last_batch",
        "_last_ctx",
        "dropped",
        "context",
    )

    def __init__(self, cap: int = DEFAULT_CAP, max_gap_s: float = DEFAULT_MAX_GAP_S) -> None:
        if not 1 <= cap <= TOP:
            raise ValueError(f"cost curve cap must be 1..{TOP}, got {cap}")
        self.cap = cap
        self.max_gap_s = max_gap_s
        n = bucket_count(cap)
        self._timed: dict[str, list[float]] = {m: [0.0] * (5 * n) for m in MODES}
        self._done: dict[str, list[int]] = {m: [0] * (3 * n) for m in MODES}
        # batch -> bucket index; batches above TOP share the last slot (TOP + 1)
        self._slot = [0] + [bucket_index(b, cap) for b in range(1, TOP + 2)]
        self._last_t: float | None = None
        self._last_slot = 0
        self._last_arr = self._timed[SPECULATIVE]
        self._last_batch = 0
        self._last_ctx: float | None = None
        self.dropped = 0
        self.context = False  # whether any step reported its context length

    def step(self, mode: str, batch: int, now: float, context: float | None = None) -> None:
        """A decode step of ``batch`` requests starts in ``mode`` at ``now`` (seconds):
        the previous one ends here and is timed."""
        last = self._last_t
        if last is not None:
            dt = now - last
            if 0.0 <= dt <= self.max_gap_s:
                a, i = self._last_arr, self._last_slot
                a[i] += 1
                a[i + 1] += dt
                a[i + 2] += dt * dt
                a[i + 3] += self._last_batch
                ctx = self._last_ctx
                if ctx is not None:
                    a[i + 4] += ctx
            else:
                self.dropped += 1
        self._last_t = now
        self._last_arr = self._timed[mode]
        self._last_slot = 5 * self._slot[batch] if batch <= TOP else 5 * self._slot[TOP + 1]
        self._last_batch = batch
        if context is not None:
            self._last_ctx = context
            self.context = True
        else:
            self._last_ctx = None

    def idle(self) -> None:
        """The last step is not timed: no decode step follows (the server went idle), or
        it also did other work (the simulator's mixed prefill steps)."""
        self._last_t = None

    def commit(self, mode: str, batch: int, tokens: int) -> None:
        """A settled step of ``batch`` decode requests committed ``tokens`` in ``mode``."""
        if batch <= 0:
            return
        c = self._done[mode]
        i = 3 * self._slot[batch] if batch <= TOP else 3 * self._slot[TOP + 1]
        c[i] += 1
        c[i + 1] += tokens
        c[i + 2] += tokens * tokens

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready: ``{"cap", "dropped", "modes": {mode: [row, ...]}}``, rows only for
        buckets with data: ``[lo, hi, steps, seconds, seconds_sq, batch_sum, verified,
        tokens, tokens_sq, context_sum]`` (context_sum null when not measured)."""
        modes: dict[str, list[list[Any]]] = {}
        for m in MODES:
            a, c = self._timed[m], self._done[m]
            rows = []
            for k in range(bucket_count(self.cap)):
                i, j = 5 * k, 3 * k
                if a[i] or c[j]:
                    lo, hi = bucket_bounds(k, self.cap)
                    rows.append(
                        [
                            lo,
                            hi,
                            int(a[i]),
                            round(a[i + 1], 6),
                            round(a[i + 2], 9),
                            int(a[i + 3]),
                            c[j],
                            c[j + 1],
                            c[j + 2],
                            round(a[i + 4], 1) if self.context else None,
                        ]
                    )
            modes[m] = rows
        return {"cap": self.cap, "dropped": self.dropped, "modes": modes}


ROW_FIELDS = ("lo", "hi", "steps", "seconds", "seconds_sq", "batch_sum", "verified", "tokens", "tokens_sq", "context_sum")


@dataclass(frozen=True)
class Bucket:
    """One mode's totals in one bucket (as published)."""

    mode: str
    lo: int
    hi: int  # 0: unbounded (the last bucket)
    steps: int
    seconds: float
    seconds_sq: float
    batch_sum: int
    verified: int
    tokens: int
    tokens_sq: int
    context_sum: float | None

    @property
    def mean_batch(self) -> float:
        return self.batch_sum / self.steps if self.steps else float(self.lo)

    @property
    def step_s(self) -> float | None:
        return self.seconds / self.steps if self.steps else None

    @property
    def tokens_per_step(self) -> float | None:
        return self.tokens / self.verified if self.verified else None

    @property
    def tok_s(self) -> float | None:
        t, s = self.tokens_per_step, self.step_s
        return t / s if t is not None and s else None

    @property
    def mean_context(self) -> float | None:
        return self.context_sum / self.steps if self.context_sum is not None and self.steps else None


@dataclass(frozen=True)
class Curves:
    """A published ``cost_curves`` entry, parsed."""

    cap: int
    dropped: int
    buckets: tuple[Bucket, ...]

    def mode(self, mode: str) -> tuple[Bucket, ...]:
        return tuple(b for b in self.buckets if b.mode == mode)

    def minus(self, earlier: Curves) -> Curves:
        """What was counted since ``earlier`` (a window of the cumulative counters)."""
        old = {(b.mode, b.hi, b.lo): b for b in earlier.buckets}
        out = []
        for b in self.buckets:
            e = old.get((b.mode, b.hi, b.lo))
            if e is None:
                out.append(b)
                continue
            d = Bucket(
                b.mode,
                b.lo,
                b.hi,
                b.steps - e.steps,
                b.seconds - e.seconds,
                b.seconds_sq - e.seconds_sq,
                b.batch_sum - e.batch_sum,
                b.verified - e.verified,
                b.tokens - e.tokens,
                b.tokens_sq - e.tokens_sq,
                None if b.context_sum is None or e.context_sum is None else b.context_sum - e.context_sum,
            )
            if d.steps > 0 or d.verified > 0:
                out.append(d)
        return Curves(self.cap, self.dropped - earlier.dropped, tuple(out))


class CurvesError(ValueError):
    pass


_INF = float("inf")


def _plain_row(row: object) -> bool:
    """``row`` is ROW_FIELDS' numbers: finite, non-negative, no bools; context_sum may be null."""
    if type(row) is not list or len(row) != len(ROW_FIELDS):
        return False
    for i, v in enumerate(row):
        t = type(v)
        if t is int or t is float:
            if not 0 <= v < _INF:  # NaN fails too
                return False
        elif not (v is None and i == len(ROW_FIELDS) - 1):  # context_sum
            return False
    return True


def _check_row(where: str, row: object) -> None:
    """CurvesError naming what is wrong with ``row`` (none for numbers of other types)."""
    if not isinstance(row, list) or len(row) != len(ROW_FIELDS):
        raise CurvesError(f"{where} must be a list of {len(ROW_FIELDS)} numbers ({', '.join(ROW_FIELDS)})")
    for name, v in zip(ROW_FIELDS, row):
        ok = (v is None and name == "context_sum") or (
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v and v != _INF
        )
        if not ok:
            raise CurvesError(f"{where}.{name}: expected a non-negative number, got {v!r:.40}")


def parse(entry: object) -> Curves:
    """A ``cost_curves`` entry from JSON; CurvesError naming what is wrong."""
    if not isinstance(entry, dict):
        raise CurvesError(f"{SNAPSHOT_KEY} must be an object, got {type(entry).__name__}")
    cap, dropped, modes = entry.get("cap"), entry.get("dropped", 0), entry.get("modes")
    if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= TOP:
        raise CurvesError(f"{SNAPSHOT_KEY}.cap must be an integer 1..{TOP}, got {cap!r}")
    if not isinstance(dropped, int) or isinstance(dropped, bool):
        raise CurvesError(f"{SNAPSHOT_KEY}.dropped must be an integer, got {dropped!r}")
    if not isinstance(modes, dict):
        raise CurvesError(f"{SNAPSHOT_KEY}.modes must be an object, got {modes!r:.60}")
    buckets = []
    for mode, rows in modes.items():
        if mode not in MODES:
            raise CurvesError(f"{SNAPSHOT_KEY}.modes: unknown mode {mode!r}")
        if not isinstance(rows, list):
            raise CurvesError(f"{SNAPSHOT_KEY}.modes.{mode} must be a list")
        for n, row in enumerate(rows):
            if not _plain_row(row):  # the tuner parses every second: the full check only when needed
                _check_row(f"{SNAPSHOT_KEY}.modes.{mode}[{n}]", row)
            lo, hi, steps, secs, secs2, bsum, ver, tok, tok2, ctx = row
            buckets.append(
                Bucket(
                    mode,
                    int(lo),
                    int(hi),
                    int(steps),
                    float(secs),
                    float(secs2),
                    int(bsum),
                    int(ver),
                    int(tok),
                    int(tok2),
                    None if ctx is None else float(ctx),
                )
            )
    return Curves(cap, dropped, tuple(buckets))
