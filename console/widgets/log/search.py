"""Search in the log view (`/`, n, N: as in less): which lines match and which match is current.
Separate from the filter, which hides lines; the view scrolls to the current match."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right

from console.widgets.log.format import compile_pattern
from console.widgets.log.rows import SUB_BITS


class LogSearch:
    def __init__(self) -> None:
        self.pattern: re.Pattern | None = None
        self.text = ""
        self.hits = array("q")  # sorted keys of the matching lines
        self.current: int | None = None  # key of the current match

    def set(self, text: str) -> None:
        """A new search (empty: none). Raises ValueError on a bad regex; hits are refilled
        by the view."""
        self.pattern = compile_pattern(text) if text else None
        self.text = text if text else ""
        self.current = None
        del self.hits[:]

    def clear(self) -> None:
        self.set("")

    def prune(self, first_seq: int) -> None:
        del self.hits[: bisect_left(self.hits, first_seq << SUB_BITS)]

    def jump(self, from_key: int, forward: bool = True) -> int | None:
        """Make current the next match at or after ``from_key`` (forward) or the last
        before it (wrapping around); returns its key, None when nothing matches."""
        if not self.hits:
            return None
        idx = bisect_left(self.hits, from_key) - (0 if forward else 1)
        self.current = self.hits[idx % len(self.hits)]
        return self.current

    def position(self) -> tuple[int, int] | None:
        """(n, of): the current match is the n-th of ``of`` (for "3/20"); None without one."""
        if self.current is None or not self.hits:
            return None
        return bisect_left(self.hits, self.current) + 1, len(self.hits)

    def step(self, forward: bool) -> int | None:
        """From the current match to the next / previous one (wrapping around)."""
        if not self.hits or self.current is None:
            return None
        idx = bisect_right(self.hits, self.current) if forward else bisect_left(self.hits, self.current) - 1
        self.current = self.hits[idx % len(self.hits)]
        return self.current
