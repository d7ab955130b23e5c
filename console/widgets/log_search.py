"""Search in the log view (ctrl+f, n, N): highlight matching lines and jump to them,
keeping context; separate from the filter, which hides lines."""
from __future__ import annotations

from bisect import bisect_left, bisect_right

from console.widgets.log_format import compile_pattern

SUB_BITS = 20  # a search hit is keyed seq << SUB_BITS | line index within the record


class SearchMixin:
    """Mixed into LogView: uses its row arrays (_seq, _sub), _hits, _match, _gen."""

    def set_search(self, text: str) -> bool:
        """ctrl+f input: highlight matching lines and jump to the first one at or below the
        top of the view. Raises ValueError on a bad regex. Returns whether anything matched."""
        self._match = None
        self._gen += 1
        if not text:
            self.search_pattern, self.search_text = None, ""
            del self._hits[:]
            self._cache.clear()
            self.refresh()
            self._post_status()
            return False
        self.search_pattern = compile_pattern(text)
        self.search_text = text
        self._rebuild()
        top = int(self.scroll_y)
        key = (self._seq[top] << SUB_BITS | self._sub[top]) if top < len(self._seq) else 0
        return self._jump_to_hit(bisect_left(self._hits, key))

    def search_step(self, forward: bool = True) -> bool:
        """`n` / `N`: jump to the next / previous matching line (wrapping around)."""
        if self.search_pattern is None or not self._hits:
            return False
        if self._match is None:
            top = min(int(self.scroll_y), len(self._seq) - 1)
            key = self._seq[top] << SUB_BITS | self._sub[top]
            idx = bisect_left(self._hits, key) if forward else bisect_left(self._hits, key) - 1
        elif forward:
            idx = bisect_right(self._hits, self._match)
        else:
            idx = bisect_left(self._hits, self._match) - 1
        return self._jump_to_hit(idx)

    def _jump_to_hit(self, idx: int) -> bool:
        if not self._hits:
            self._post_status()
            return False
        self._match = self._hits[idx % len(self._hits)]
        self._gen += 1
        row = self.current_match_row()
        if row is not None:
            self._show_row(row)
        self._post_status()
        return True

    def current_match_row(self) -> int | None:
        """Row index of the current match's first row (None when there is none)."""
        if self._match is None:
            return None
        seq, sub = self._match >> SUB_BITS, self._match & ((1 << SUB_BITS) - 1)
        idx = bisect_left(self._seq, seq)
        while idx < len(self._seq) and self._seq[idx] == seq:
            if self._sub[idx] == sub:
                return idx
            idx += 1
        return None

    def _show_row(self, idx: int) -> None:
        """Scroll so row ``idx`` sits a third of the way down, with context around it."""
        height = self.scrollable_content_region.height or 1
        target = max(0, min(idx - height // 3, self.max_scroll_y))
        if idx < len(self._seq) - height:
            self._set_follow(False)
        self.scroll_to(y=target, animate=False, immediate=True)
        self.refresh()
