"""The log view: a Line API widget that renders only the visible rows.

Reads records from the session's ``LogStore`` (``since(seq)``), in batches: a notification
schedules one flush ~50 ms later, so a burst of thousands of lines costs one repaint.
Follows the end while at the bottom; scrolling up pauses and counts new lines; reaching
the bottom again (or `f` / `end`) resumes. Filter (hide) and search (highlight and jump)
are separate. Long lines are capped for display only.
"""
from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.messages import LogViewChanged
from console.widgets.log_search import SUB_BITS, SearchMixin
from console.widgets.log_format import (
    CURRENT_MATCH_STYLE, CURRENT_ROW_STYLE, MATCH_STYLE, LineFilter,
    record_lines, record_text, style_for,
)

FLUSH_S = 0.05


class LogView(SearchMixin, ScrollView, can_focus=True):
    """Rows are kept as arrays of ints (record seq, line index, start, end), not objects:
    100k rows cost ~3 MB and nothing for the garbage collector to walk. Text comes from
    the store (``store.get(seq)``) only for the rows on screen."""

    DEFAULT_CSS = """
    LogView { background: $surface; overflow-x: auto; overflow-y: scroll; }
    LogView:focus { background-tint: $foreground 4%; }
    """

    def __init__(self, store=None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.follow = True
        self.wrap = False
        self.new_while_paused = 0
        self.filter = LineFilter()
        self.search_pattern: re.Pattern | None = None
        self.search_text = ""
        self.ranks: list[str] = []
        self._seq, self._sub, self._start, self._end = (array("q") for _ in range(4))
        self._hits = array("q")           # sorted keys of the lines matching the search
        self._last_seq = 0
        self._width = 0
        self._wrap_width = 0
        self._match: int | None = None    # hit key of the current search match
        self._gen = 0                     # bumps when highlighting changes
        self._flush_pending = False
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)

    @property
    def row_count(self) -> int:
        return len(self._seq)

    @property
    def search_hits(self) -> int:
        return len(self._hits)

    # ---- feeding ---------------------------------------------------------------
    def set_store(self, store) -> None:
        self.store = store
        self._last_seq = 0
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
        new = self.store.since(self._last_seq)
        if not new:
            self._post_status()
            return 0
        self._last_seq = new[-1].seq
        removed = self._prune()
        before = len(self._seq)
        self._add_rows(new)
        added = len(self._seq) - before
        self._update_virtual_size()
        if self.follow:
            self._stick()
        else:
            self.new_while_paused += added
            if removed:
                self.scroll_to(y=max(0, self.scroll_y - removed), animate=False, immediate=True)
        self.refresh()
        self._post_status()
        return added

    def _prune(self) -> int:
        """Forget rows of records the store has dropped; returns how many rows went."""
        first = getattr(self.store, "first_seq", 1)
        cut = bisect_left(self._seq, first)
        if cut:
            for arr in (self._seq, self._sub, self._start, self._end):
                del arr[:cut]
            del self._hits[:bisect_left(self._hits, first << SUB_BITS)]
        return cut

    def _add_rows(self, records) -> None:
        accepts = self.filter.accepts if self.filter.active else None
        width = self._wrap_width if self.wrap else 0
        pattern = self.search_pattern
        seqs, subs, starts, ends, hits = [], [], [], [], []
        widest = self._width
        for rec in records:
            if accepts is not None and not accepts(rec):
                continue
            seq = rec.seq
            for i, line in enumerate(record_lines(rec)):
                n = len(line)
                if pattern is not None and pattern.search(line):
                    hits.append(seq << SUB_BITS | i)
                if width <= 0 or n <= width:
                    seqs.append(seq), subs.append(i), starts.append(0), ends.append(n)
                    widest = max(widest, n)
                else:
                    for s in range(0, n, width):
                        seqs.append(seq), subs.append(i), starts.append(s), ends.append(min(n, s + width))
        self._seq.extend(seqs), self._sub.extend(subs), self._start.extend(starts), self._end.extend(ends)
        self._hits.extend(hits)
        self._width = widest

    def _known_records(self) -> list:
        """Records in the store up to the last one flushed into the view."""
        if self.store is None or not self._last_seq:
            return []
        last = self._last_seq
        return [r for r in self.store.since(0) if r.seq <= last]

    def _update_virtual_size(self) -> None:
        width = self._wrap_width if self.wrap else self._width + 1
        self.virtual_size = Size(width, len(self._seq))

    def _rebuild(self) -> None:
        """Recompute rows after a filter/wrap/size/search change, keeping the top record in view."""
        top_y = int(self.scroll_y)
        top = self._seq[top_y] if top_y < len(self._seq) else None
        self._wrap_width = max(10, self.scrollable_content_region.width or self.size.width or 80)
        self._width = 0
        for arr in (self._seq, self._sub, self._start, self._end, self._hits):
            del arr[:]
        self._add_rows(self._known_records())
        self._cache.clear()
        self._update_virtual_size()
        if self.follow or top is None:
            self._stick()
        else:
            self.scroll_to(y=bisect_left(self._seq, top), animate=False, immediate=True)
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
        seen = {r.split()[-1] for r in (getattr(rec, "rank", None) for rec in self._known_records()) if r}
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

    # ---- save ----------------------------------------------------------------------
    def shown_records(self) -> list:
        """The records shown (after filters), oldest first."""
        shown = set(self._seq)
        return [r for r in self._known_records() if r.seq in shown]

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
        if idx >= len(self._seq) or self.store is None:
            return Strip.blank(width, rich_style)
        seq, sub, start = self._seq[idx], self._sub[idx], self._start[idx]
        current = self._match is not None and self._match == (seq << SUB_BITS | sub)
        key = (seq, sub, start, self._gen if (current or self.search_pattern) else 0, current)
        strip = self._cache.get(key)
        if strip is None:
            rec = self.store.get(seq)
            if rec is None:
                return Strip.blank(width, rich_style)
            strip = self._render_row(rec, sub, start, self._end[idx], current)
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style)

    def _render_row(self, rec, sub: int, s: int, e: int, current: bool) -> Strip:
        lines = record_lines(rec)
        full = lines[sub] if sub < len(lines) else ""
        line = full[s:e]
        text = Text(line, no_wrap=True, end="")
        text.stylize(self.rich_style)
        style = style_for(rec)
        if style is not None:
            text.stylize(style)
        if current:
            text.stylize(CURRENT_ROW_STYLE)
        if self.search_pattern is not None:
            hit = CURRENT_MATCH_STYLE if current else MATCH_STYLE
            for m in self.search_pattern.finditer(full):
                a, b = max(m.start(), s) - s, min(m.end(), e) - s
                if b > a:
                    text.stylize(hit, a, b)
        return Strip(text.render(self.app.console), cell_len(line))

    # ---- status ----------------------------------------------------------------------
    def status(self) -> dict:
        store = self.store
        return {
            "follow": self.follow,
            "new": self.new_while_paused,
            "shown": len(self._seq),
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
