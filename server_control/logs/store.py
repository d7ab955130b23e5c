"""A bounded in-memory store of log records, with filter, search and honest counters.

Records are kept as three columns (first line number, kind, raw text): strings and ints
are not tracked by the garbage collector, so a store of 100k records costs little to keep
and nothing to collect. ``Record`` objects are made on the way out (``since``, ``tail``,
``filter``, ``search``, ``get``). Sequence numbers start at 1 and never repeat.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any

from server_control.logs.pattern import compile_pattern
from server_control.logs.record import CONSOLE, DECODE, DISPLAY_CAP, KINDS, Record, is_long

DEFAULT_CAPACITY = 100_000


def check_kinds(kinds: str | Iterable[str] | None) -> frozenset[str] | None:
    """Validate a kind filter ("decode", ["decode", "prefill"], "decode,http" or None)."""
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = [k for k in kinds.split(",") if k.strip()]
    wanted = frozenset(k.strip() for k in kinds)
    unknown = sorted(wanted.difference(KINDS))
    if unknown:
        raise ValueError(f"unknown record kind {', '.join(map(repr, unknown))}: expected one of {', '.join(KINDS)}")
    return wanted


def rank_matches(wanted: str, rank: str | None) -> bool:
    """'TP3' matches 'TP3' and 'DP3 TP3'; 'DP3 TP3' needs both tags."""
    if rank is None:
        return False
    return set(wanted.split()) <= set(rank.split())


class LogStore:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, display_cap: int = DISPLAY_CAP) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"log store capacity must be a positive integer, got {capacity!r}")
        self.capacity = capacity
        self.display_cap = display_cap
        self._lines: deque[int] = deque(maxlen=capacity)
        self._kinds: deque[str] = deque(maxlen=capacity)
        self._raws: deque[str] = deque(maxlen=capacity)
        self.total = 0  # records ever stored
        self.truncated = 0  # records with a line longer than display_cap (kept whole)
        self._decode_made: dict[int, Record] = {}  # decode_tail's last records, by seq

    # ---- adding -----------------------------------------------------------------------
    def extend_columns(self, nums: list[int], kinds: list[str], raws: list[str]) -> int:
        """Add records given as columns (as ``Parser.feed`` returns them)."""
        n = len(raws)
        if not n:
            return 0
        cap = self.display_cap
        if max(map(len, raws)) > cap:
            self.truncated += sum(1 for r in raws if is_long(r, cap))
        if n >= self.capacity:  # only the newest fit
            nums, kinds, raws = nums[-self.capacity :], kinds[-self.capacity :], raws[-self.capacity :]
        self._lines.extend(nums)
        self._kinds.extend(kinds)
        self._raws.extend(raws)
        self.total += n
        return n

    def add_console_line(self, text: str) -> int:
        """A line of the console's own between the server's (kind "console", line 0): where
        the server stopped answering, where a new run's log begins. Returns its seq."""
        self.extend_columns([0], [CONSOLE], [text])
        return self.total

    def extend(self, records: Iterable[Record]) -> int:
        """Add records; each gets its ``seq``."""
        records = list(records)
        for i, rec in enumerate(records, self.total + 1):
            rec.seq = i
        return self.extend_columns([r.line for r in records], [r.kind for r in records], [r.raw for r in records])

    # ---- counters ----------------------------------------------------------------------
    @property
    def dropped(self) -> int:
        """Records that left memory because the store was full."""
        return self.total - len(self._raws)

    @property
    def first_seq(self) -> int:
        """Seq of the oldest record in memory (total + 1 when empty)."""
        return self.total - len(self._raws) + 1

    @property
    def last_seq(self) -> int:
        """Seq of the newest record (0 when nothing was ever stored)."""
        return self.total

    def counters(self) -> dict[str, Any]:
        return {"total": self.total, "dropped": self.dropped, "truncated": self.truncated}

    def __len__(self) -> int:
        return len(self._raws)

    # ---- reading -----------------------------------------------------------------------
    def _record(self, index: int) -> Record:
        return Record(self._lines[index], self._kinds[index], self._raws[index], self.first_seq + index)

    def get(self, seq: int) -> Record | None:
        index = seq - self.first_seq
        if 0 <= index < len(self._raws):
            return self._record(index)
        return None

    def _newest(self, k: int) -> list[Record]:
        k = min(k, len(self._raws))
        if k <= 0:
            return []
        nums = list(islice(reversed(self._lines), k))[::-1]
        kinds = list(islice(reversed(self._kinds), k))[::-1]
        raws = list(islice(reversed(self._raws), k))[::-1]
        seq = self.total - k + 1
        return [Record(n, kd, r, s) for s, n, kd, r in zip(range(seq, seq + k), nums, kinds, raws)]

    def since(self, seq: int, limit: int | None = None) -> list[Record]:
        """Records with a seq greater than ``seq`` still in memory, oldest first
        (at most ``limit``, the oldest ones, when given)."""
        out = self._newest(self.total - seq)
        return out if limit is None else out[:limit]

    def tail(self, n: int) -> list[Record]:
        return self._newest(n)

    def tail_of_kind(self, kind: str, n: int) -> list[Record]:
        """The records of ``kind`` among the newest ``n``, oldest first: only the kind column
        is read for the others (the poller's look for decode lines, every poll)."""
        k = min(n, len(self._kinds))
        last = len(self._kinds) - 1
        picked = [last - j for j, kd in enumerate(islice(reversed(self._kinds), k)) if kd == kind]
        return [self._record(i) for i in reversed(picked)]

    def decode_tail(self, n: int = 400) -> list[Record]:
        """The `Decode batch` records among the newest ``n`` (the session's poller reads a load
        from them every poll: telemetry/http_poll.py). A record returned by the last call is
        returned again as the same object, its fields parsed once, not at every poll."""
        k = min(n, len(self._kinds))
        last, first = len(self._kinds) - 1, self.first_seq
        picked = [last - j for j, kd in enumerate(islice(reversed(self._kinds), k)) if kd == DECODE]
        made = self._decode_made
        out = [made.get(first + i) or self._record(i) for i in reversed(picked)]
        self._decode_made = {r.seq: r for r in out}
        return out

    def records(self) -> list[Record]:
        return self._newest(len(self._raws))

    def filter(
        self,
        pattern: str | re.Pattern[str] | None = None,
        invert: bool = False,
        kinds: str | Iterable[str] | None = None,
        rank: str | None = None,
    ) -> list[Record]:
        """Records in memory that match: ``pattern`` (regex over the raw line, or not when
        ``invert``), of one of ``kinds``, from ``rank``. Raises ValueError on a bad pattern
        or an unknown kind."""
        rx = compile_pattern(pattern) if pattern not in (None, "") else None
        wanted = check_kinds(kinds)
        first = self.first_seq
        rows: Iterable[tuple[int, int, str, str]] = zip(
            range(first, first + len(self._raws)), self._lines, self._kinds, self._raws
        )
        if wanted is not None:
            rows = ((s, n, k, r) for s, n, k, r in rows if k in wanted)
        if rx is not None:
            search = rx.search
            if invert:
                rows = ((s, n, k, r) for s, n, k, r in rows if search(r) is None)
            else:
                rows = ((s, n, k, r) for s, n, k, r in rows if search(r) is not None)
        out = [Record(n, k, r, s) for s, n, k, r in rows]
        if rank:
            out = [rec for rec in out if rank_matches(rank, rec.rank)]
        return out

    def search(self, pattern: str | re.Pattern[str], start_seq: int, backwards: bool = False) -> Record | None:
        """The first record after ``start_seq`` (before it, when ``backwards``) whose raw
        text matches ``pattern``; None when there is none."""
        search = compile_pattern(pattern).search
        raws = self._raws
        first = self.first_seq
        n = len(raws)
        if backwards:
            stop = min(start_seq - first, n)  # indices below this
            if stop <= 0:
                return None
            for back, raw in enumerate(islice(reversed(raws), n - stop, None)):
                if search(raw) is not None:
                    return self._record(stop - 1 - back)
            return None
        begin = max(start_seq - first + 1, 0)
        for offset, raw in enumerate(islice(raws, begin, None)):
            if search(raw) is not None:
                return self._record(begin + offset)
        return None


def record_matcher(
    pattern: str | re.Pattern[str] | None = None,
    invert: bool = False,
    kinds: str | Iterable[str] | None = None,
    rank: str | None = None,
) -> Callable[[Record], bool]:
    """A predicate over ``Record`` with the semantics of ``LogStore.filter`` (for streams).
    Raises ValueError on a bad pattern or an unknown kind, before any record is seen."""
    rx = compile_pattern(pattern) if pattern not in (None, "") else None
    wanted = check_kinds(kinds)

    def matches(rec: Record) -> bool:
        if wanted is not None and rec.kind not in wanted:
            return False
        if rx is not None and (rx.search(rec.raw) is None) != invert:
            return False
        return not rank or rank_matches(rank, rec.rank)

    return matches
