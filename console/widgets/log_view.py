"""The log view: a Line API widget that renders only the visible rows.

Reads records from the session's ``LogStore`` (``since(seq)``), in batches: a notification
schedules one flush ~50 ms later, so a burst of thousands of lines costs one repaint.
Follows the end while at the bottom; scrolling up pauses and counts new lines; reaching
the bottom again (or `f` / `end`) resumes. Filter (hide) and search (highlight and jump)
are separate. Long lines are capped for display only.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.messages import LogViewChanged
from console.widgets.log_format import (
    CURRENT_MATCH_STYLE, CURRENT_ROW_STYLE, MATCH_STYLE, LineFilter, compile_pattern,
    record_lines, record_text, style_for,
)

FLUSH_S = 0.05
DEFAULT_CAP = 100_000


def _row_key(row):
    return (row[0].seq, row[1], row[2])


class LogView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LogView { background: $surface; overflow-x: auto; overflow-y: scroll; }
    LogView:focus { background-tint: $foreground 4%; }
    """

    def __init__(self, store=None, cap: int | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.cap = cap or getattr(store, "capacity", None) or DEFAULT_CAP
        self.follow = True
        self.wrap = False
        self.new_while_paused = 0
        self.filter = LineFilter()
        self.search_pattern: re.Pattern | None = None
        self.search_text = ""
        self.search_hits = 0
        self.ranks: list[str] = []
        self._records: list = []          # mirror of the store (bounded), in seq order
        self._rows: list[tuple] = []      # (record, line index, start, end) after the filter
        self._last_seq = -1
        self._width = 0
        self._wrap_width = 0
        self._match: tuple | None = None  # row key of the current search match
        self._gen = 0                     # bumps when highlighting changes
        self._flush_pending = False
        self._cache: LRUCache[tuple, Strip] = LRUCache(2048)

    # ---- feeding ---------------------------------------------------------------
    def set_store(self, store) -> None:
        self.store = store
        self._records.clear()
        self._last_seq = -1
        self._rebuild()
        self.notify_new()

    def notify_new(self) -> None:
        """New records may be in the store: flush them in one batch shortly."""
        if not self._flush_pending and self.store is not None:
            self._flush_pending = True
            self.set_timer(FLUSH_S, self.flush)

    def flush(self) -> int:
        """Pull new records from the store now; returns how many rows were added."""
        self._flush_pending = False
        if self.store is None:
            return 0
        new = [r for r in self.store.since(self._last_seq) if r.seq > self._last_seq]
        if not new:
            self._post_status()
            return 0
        self._last_seq = new[-1].seq
        self._records.extend(new)
        removed = self._prune()
        rows = self._rows_for(new)
        self._rows.extend(rows)
        if self.search_pattern is not None:
            self.search_hits += sum(1 for r in rows if self._row_matches(r))
        self._update_virtual_size(rows)
        if self.follow:
            self._stick()
        else:
            self.new_while_paused += len(rows)
            if removed:
                self.scroll_to(y=max(0, self.scroll_y - removed), animate=False, immediate=True)
        self.refresh()
        self._post_status()
        return len(rows)

    def _prune(self) -> int:
        """Drop records beyond the cap (the store has dropped them too); returns rows removed."""
        extra = len(self._records) - self.cap
        if extra <= 0:
            return 0
        first_kept = self._records[extra].seq
        del self._records[:extra]
        cut = 0
        while cut < len(self._rows) and self._rows[cut][0].seq < first_kept:
            cut += 1
        if self.search_pattern is not None:
            self.search_hits -= sum(1 for r in self._rows[:cut] if self._row_matches(r))
        del self._rows[:cut]
        return cut

    def _rows_for(self, records) -> list[tuple]:
        rows = []
        accepts = self.filter.accepts if self.filter.active else None
        width = self._wrap_width if self.wrap else 0
        for rec in records:
            if accepts is not None and not accepts(rec):
                continue
            for i, line in enumerate(record_lines(rec)):
                n = len(line)
                if width <= 0 or n <= width:
                    rows.append((rec, i, 0, n))
                else:
                    rows.extend((rec, i, s, min(n, s + width)) for s in range(0, n, width))
        return rows

    def _update_virtual_size(self, new_rows) -> None:
        if new_rows and not self.wrap:
            self._width = max(self._width, max(r[3] - r[2] for r in new_rows) + 1)
        width = self._wrap_width if self.wrap else self._width
        self.virtual_size = Size(width, len(self._rows))

    def _rebuild(self) -> None:
        """Recompute rows after a filter/wrap/size change, keeping the top record in view."""
        top = self._rows[int(self.scroll_y)][0].seq if self._rows and self.scroll_y < len(self._rows) else None
        self._wrap_width = max(10, self.scrollable_content_region.width or self.size.width or 80)
        self._width = 0
        self._rows = self._rows_for(self._records)
        self.search_hits = sum(1 for r in self._rows if self._row_matches(r)) if self.search_pattern else 0
        self._cache.clear()
        self._update_virtual_size(self._rows)
        if self.follow or top is None:
            self._stick()
        else:
            idx = bisect_left(self._rows, top, key=lambda r: r[0].seq)
            self.scroll_to(y=idx, animate=False, immediate=True)
        self.refresh()
        self._post_status()

    # ---- follow ----------------------------------------------------------------
    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        at_end = new_value >= self.max_scroll_y
        if at_end and not self.follow and new_value > old_value:
            self._set_follow(True)
        elif not at_end and self.follow and new_value < old_value:
            self._set_follow(False)

    def on_mount(self) -> None:
        self.anchor()  # Textual keeps an anchored view at the end across layouts

    def _stick(self) -> None:
        self.anchor()
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def _set_follow(self, on: bool) -> None:
        if on == self.follow:
            return
        self.follow = on
        if on:
            self.new_while_paused = 0
            self.anchor()
        else:
            self.release_anchor()
        self._post_status()

    def toggle_follow(self) -> None:
        if self.follow:
            self._set_follow(False)
        else:
            self.jump_end()

    def jump_end(self) -> None:
        self.follow = True
        self.new_while_paused = 0
        self._stick()
        self._post_status()

    def jump_home(self) -> None:
        self._set_follow(False)
        self.scroll_home(animate=False, immediate=True, x_axis=False)

    # Keyboard scrolling without animation (an animation racing the follow logic would
    # fight it, and over SSH every frame costs).
    def action_scroll_home(self) -> None:
        self.jump_home()

    def action_scroll_end(self) -> None:
        self.jump_end()

    def action_scroll_up(self) -> None:
        self.scroll_up(animate=False)

    def action_scroll_down(self) -> None:
        self.scroll_down(animate=False)

    def action_page_up(self) -> None:
        self.scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self.scroll_page_down(animate=False)

    def on_resize(self, event) -> None:
        if self.wrap:
            self._rebuild()
        elif self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # ---- filter / quick filters / wrap --------------------------------------------
    def set_filter_text(self, text: str) -> None:
        """`/` input. Raises ValueError (bad regex) and leaves the old filter in place."""
        self.filter = LineFilter.parse(text, self.filter)
        self._rebuild()

    def toggle_errors_only(self) -> None:
        self.filter.errors_only = not self.filter.errors_only
        self._rebuild()

    def toggle_hide_stats(self) -> None:
        self.filter.hide_stats = not self.filter.hide_stats
        self._rebuild()

    def cycle_rank(self) -> None:
        """One rank at a time: none -> each rank seen in the records (TP0, TP1, ...) -> none."""
        seen = {r.split()[-1] for r in (getattr(rec, "rank", None) for rec in self._records) if r}
        self.ranks = sorted(seen)
        choices = [None, *self.ranks]
        pos = choices.index(self.filter.rank) if self.filter.rank in choices else 0
        self.filter.rank = choices[(pos + 1) % len(choices)]
        self._rebuild()

    def clear_all(self) -> None:
        self.filter = LineFilter()
        self.search_pattern, self.search_text, self._match = None, "", None
        self._gen += 1
        self._rebuild()

    def toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self._rebuild()

    # ---- search ------------------------------------------------------------------
    def _row_matches(self, row) -> bool:
        rec, i, s, e = row
        return self.search_pattern.search(record_lines(rec)[i][s:e]) is not None

    def set_search(self, text: str) -> bool:
        """ctrl+f input: highlight matches and jump to the first one below the top of the
        view. Raises ValueError on a bad regex. Returns whether anything matched."""
        if not text:
            self.search_pattern, self.search_text, self._match = None, "", None
            self.search_hits = 0
            self._gen += 1
            self.refresh()
            self._post_status()
            return False
        self.search_pattern = compile_pattern(text)
        self.search_text = text
        self._gen += 1
        self._cache.clear()
        self.search_hits = sum(1 for r in self._rows if self._row_matches(r))
        self._match = None
        return self.search_step(forward=True, start=int(self.scroll_y))

    def search_step(self, forward: bool = True, start: int | None = None) -> bool:
        """`n` / `N`: jump to the next / previous matching row (wrapping around)."""
        if self.search_pattern is None or not self._rows:
            return False
        n = len(self._rows)
        if start is None:
            cur = self.current_match_row()
            start = (cur + (1 if forward else -1)) if cur is not None else int(self.scroll_y)
        sign = 1 if forward else -1
        for k in range(n):
            idx = (start + sign * k) % n
            if self._row_matches(self._rows[idx]):
                self._match = _row_key(self._rows[idx])
                self._gen += 1
                self._show_row(idx)
                self._post_status()
                return True
        self._post_status()
        return False

    def current_match_row(self) -> int | None:
        if self._match is None:
            return None
        idx = bisect_left(self._rows, self._match, key=_row_key)
        if idx < len(self._rows) and _row_key(self._rows[idx]) == self._match:
            return idx
        return None

    def _show_row(self, idx: int) -> None:
        """Scroll so row ``idx`` sits a third of the way down, with context around it."""
        height = self.scrollable_content_region.height or 1
        target = max(0, min(idx - height // 3, self.max_scroll_y))
        if target < self.max_scroll_y or idx < len(self._rows) - height:
            self._set_follow(False)
        self.scroll_to(y=target, animate=False, immediate=True)
        self.refresh()

    # ---- save ----------------------------------------------------------------------
    def shown_records(self) -> list:
        seen, out = set(), []
        for rec, *_ in self._rows:
            if rec.seq not in seen:
                seen.add(rec.seq)
                out.append(rec)
        return out

    def save(self, path: str | Path) -> int:
        """Write the records shown (after filters) to ``path``; returns the record count."""
        recs = self.shown_records()
        path = Path(path).expanduser()
        with path.open("w", encoding="utf-8") as fh:
            for rec in recs:
                fh.write(record_text(rec) + "\n")
        return len(recs)

    # ---- rendering -----------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        idx = scroll_y + y
        width = self.scrollable_content_region.width
        rich_style = self.rich_style
        if idx >= len(self._rows):
            return Strip.blank(width, rich_style)
        row = self._rows[idx]
        current = self._match is not None and _row_key(row) == self._match
        key = (*_row_key(row), self._gen if (current or self.search_pattern) else 0, current)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(row, current)
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style)

    def _render_row(self, row, current: bool) -> Strip:
        rec, i, s, e = row
        line = record_lines(rec)[i][s:e]
        text = Text(line, no_wrap=True, end="")
        text.stylize(self.rich_style)
        style = style_for(rec)
        if style is not None:
            text.stylize(style)
        if current:
            text.stylize(CURRENT_ROW_STYLE)
        if self.search_pattern is not None:
            hit = CURRENT_MATCH_STYLE if current else MATCH_STYLE
            for m in self.search_pattern.finditer(line):
                if m.end() > m.start():
                    text.stylize(hit, m.start(), m.end())
        return Strip(text.render(self.app.console), cell_len(line))

    # ---- status ----------------------------------------------------------------------
    def status(self) -> dict:
        store = self.store
        return {
            "follow": self.follow,
            "new": self.new_while_paused,
            "shown": len(self._rows),
            "total": getattr(store, "total", 0) if store is not None else 0,
            "dropped": getattr(store, "dropped", 0) if store is not None else 0,
            "truncated": getattr(store, "truncated", 0) if store is not None else 0,
            "filter": self.filter.describe(),
            "search": self.search_text,
            "hits": self.search_hits,
            "wrap": self.wrap,
        }

    def _post_status(self) -> None:
        self.post_message(LogViewChanged(self.status()))
