"""The log view's rows, kept as arrays of ints rather than objects: 100k rows cost ~3 MB
and nothing for the garbage collector to walk. A row is (record seq, line index within the
record, start column, end column); text is read back from the store only for rows shown."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from console.widgets.log.format import record_lines

if TYPE_CHECKING:
    from server_control.logs import Record


SUB_BITS = 20  # a line's key: seq << SUB_BITS | line index within the record


class Rows:
    def __init__(self) -> None:
        self.seq, self.sub, self.start, self.end = (array("q") for _ in range(4))
        self.widest = 0  # the longest unwrapped line seen

    def __len__(self) -> int:
        return len(self.seq)

    def clear(self) -> None:
        for arr in (self.seq, self.sub, self.start, self.end):
            del arr[:]
        self.widest = 0

    def prune(self, first_seq: int) -> int:
        """Forget the rows of records below ``first_seq``; returns how many rows went."""
        cut = bisect_left(self.seq, first_seq)
        if cut:
            for arr in (self.seq, self.sub, self.start, self.end):
                del arr[:cut]
        return cut

    def add(
        self, records: Iterable[Record], accepts: Callable[[Record], bool] | None, wrap_width: int, pattern: re.Pattern | None
    ) -> list[int]:
        """Append the rows of ``records`` (those ``accepts`` takes; wrapped at ``wrap_width``
        when > 0); returns the keys of the lines ``pattern`` matches."""
        seqs, subs, starts, ends, hits = [], [], [], [], []
        widest = self.widest
        for rec in records:
            if accepts is not None and not accepts(rec):
                continue
            seq = rec.seq
            for i, line in enumerate(record_lines(rec)):
                n = len(line)
                if pattern is not None and pattern.search(line):
                    hits.append(seq << SUB_BITS | i)
                cuts = (
                    [(0, n)]
                    if wrap_width <= 0 or n <= wrap_width
                    else [(s, min(n, s + wrap_width)) for s in range(0, n, wrap_width)]
                )
                if len(cuts) == 1:
                    widest = max(widest, n)
                for start, end in cuts:
                    seqs.append(seq)
                    subs.append(i)
                    starts.append(start)
                    ends.append(end)
        self.seq.extend(seqs)
        self.sub.extend(subs)
        self.start.extend(starts)
        self.end.extend(ends)
        self.widest = widest
        return hits

    def key(self, row: int) -> int:
        return self.seq[row] << SUB_BITS | self.sub[row]

    def row_of(self, key: int) -> int | None:
        """The first row of the line ``key`` (None when it is not shown)."""
        seq, sub = key >> SUB_BITS, key & ((1 << SUB_BITS) - 1)
        row = bisect_left(self.seq, seq)
        while row < len(self.seq) and self.seq[row] == seq:
            if self.sub[row] == sub:
                return row
            row += 1
        return None
