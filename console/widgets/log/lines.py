"""The rows of a ``LogStore`` on screen: a Line API widget that renders only the visible
rows (the base of the log view, console/widgets/log/view.py, which adds the keys, the
filter and the search jumps).

Reads records from the store (``since(seq)``), in batches: a notification schedules one
flush ~50 ms later, so a burst of thousands of lines costs one repaint. ``follow`` (a
reactive) sticks to the end; scrolling up pauses and counts new lines; reaching the bottom
again resumes. ``wrap`` (a reactive) wraps long lines; long lines are capped for display
only. Polling access lines are kept back unless ``show_polls``, the copies of one event
that every TP rank logs are folded into one row unless ``fold`` is off: both counted on
the status line (console/widgets/log/select.py). Matches of the search are highlighted.
"""

from __future__ import annotations

import time
from bisect import bisect_left

from rich.cells import cell_len
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.messages import LogViewChanged, LogViewStatus
from console.widgets.log.format import COLOR_MARKS, NO_COLOR_MARKS, LineFilter, render_row
from console.widgets.log.line_numbers import gutter, gutter_width
from console.widgets.log.rows import SUB_BITS, Rows
from console.widgets.log.search import LogSearch
from console.widgets.log.select import Selection
from server_control.logs import LogStore

FLUSH_S = 0.05  # a burst of lines is one flush
REDRAW_S = 1.0  # new rows reach the view at most once a second: following, each scroll
# repaints every row shown; paused, the scroll bar and the counter move
# (over ssh that is the console's traffic: 2/s was 12 KB/s busy)


class LogLines(ScrollView):
    """Rows are integer arrays (``log_rows.Rows``); text comes from the store
    (``store.get(seq)``) only for the rows on screen."""

    follow: var[bool] = var(True, init=False)
    wrap: var[bool] = var(False, init=False)
    show_polls: var[bool] = var(False, init=False)
    fold: var[bool] = var(True, init=False)
    numbers: var[bool] = var(False, init=False)  # `#`: file line numbers (console/widgets/log/line_numbers.py)

    def __init__(self, store: LogStore | None = None, *, save_name: str = "log", id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.save_name = save_name  # ctrl+s offers ~/specconsole-<name>-<time>.log
        self.new_while_paused = 0
        self.filter = LineFilter()
        self.selection = Selection(self.filter)
        self.search = LogSearch()
        self.ranks: list[str] = []
        self.rows = Rows()
        self._last_seq = 0
        self._wrap_width = 0
        self._gen = 0  # bumps when highlighting changes
        self._flush_pending = False
        self._last_rows = 0.0  # monotonic time of the last flush that added rows
        self._status: LogViewStatus | None = None
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)
        self.mark: int | None = None  # the current line's key (`:` go-to-line marks it)
        self.init_next = 0  # `I`: the init line it goes to next (line_numbers.goto_init)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    # ---- feeding ---------------------------------------------------------------
    def set_store(self, store: LogStore) -> None:
        self.store = store
        self._last_seq = 0
        self._rebuild()
        self.notify_new()

    def notify_new(self) -> None:
        """New records may be in the store: flush them in one batch shortly (FLUSH_S), and
        no sooner than REDRAW_S after the last flush that added rows."""
        if not self._flush_pending and self.store is not None:
            self._flush_pending = True
            wait = max(FLUSH_S, self._last_rows + REDRAW_S - time.monotonic())
            self.set_timer(wait, self.flush)

    def flush(self) -> int:
        """Pull new records from the store now; returns how many rows were added. Only rows
        that reach the screen repaint it: records kept back (polls) or rows added below a
        paused view change the counters and the scroll bar, not the lines shown."""
        self._flush_pending = False
        if self.store is None:
            return 0
        new = self.store.since(self._last_seq)
        if not new:
            self._post_status()
            return 0
        self._last_seq = new[-1].seq
        removed = self.rows.prune(self.store.first_seq)
        if removed:
            self.search.prune(self.store.first_seq)
        before = len(self.rows)
        self._add_rows(new)
        added = len(self.rows) - before
        if added or removed:
            self._last_rows = time.monotonic()
            visible = before < int(self.scroll_y) + (self.scrollable_content_region.height or 0)
            self._update_virtual_size()
            if self.follow:
                self._stick()
                self.refresh()
            else:
                self.new_while_paused += added
                if removed:
                    self.scroll_to(y=max(0, self.scroll_y - removed), animate=False, immediate=True)
                if removed or visible:
                    self.refresh()
        self._post_status()
        return added

    def _add_rows(self, records) -> None:
        hits = self.rows.add(self.selection.take(records), None, self._wrap_width if self.wrap else 0, self.search.pattern)
        self.search.hits.extend(hits)

    def known_records(self) -> list:
        """Records in the store up to the last one flushed into the view."""
        if self.store is None or not self._last_seq:
            return []
        last = self._last_seq
        return [r for r in self.store.since(0) if r.seq <= last]

    def _update_virtual_size(self) -> None:
        """The scroll bars follow the rows; the rows shown repaint only where the caller
        refreshes (Textual's ``virtual_size`` reactive would repaint every row shown)."""
        width = self._wrap_width if self.wrap else self.rows.widest + 1
        size = Size(width, len(self.rows))
        if size != self.virtual_size:
            self.set_reactive(LogLines.virtual_size, size)
            self.refresh(repaint=False, layout=True)

    def _rebuild(self) -> None:
        """Recompute rows after a filter/wrap/size/search change, keeping the top record in view."""
        top_y = int(self.scroll_y)
        top = self.rows.seq[top_y] if top_y < len(self.rows) else None
        self._wrap_width = max(10, (self.scrollable_content_region.width or self.size.width or 80) - self._gutter())
        self.rows.clear()
        self.selection = Selection(self.filter, self.show_polls, self.fold)
        del self.search.hits[:]
        self._add_rows(self.known_records())
        self._cache.clear()
        self._update_virtual_size()
        if self.follow or top is None:
            self._stick()
        else:
            self.scroll_to(y=bisect_left(self.rows.seq, top), animate=False, immediate=True)
        self.refresh()
        self._post_status()

    # ---- follow and wrap (reactives) ----------------------------------------------
    def watch_follow(self, on: bool) -> None:
        if on:
            self.new_while_paused = 0
            self.anchor()
        else:
            self.release_anchor()
        self._post_status()

    def watch_wrap(self) -> None:
        self._rebuild()

    def watch_show_polls(self) -> None:
        self._rebuild()

    def watch_fold(self) -> None:
        self._rebuild()

    def watch_numbers(self) -> None:
        self._rebuild()

    def _gutter(self) -> int:
        return gutter_width(self.store) if self.numbers else 0

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        at_end = new_value >= self.max_scroll_y
        if at_end and not self.follow and new_value > old_value:
            self.follow = True
        elif not at_end and self.follow and new_value < old_value:
            self.follow = False

    def on_mount(self) -> None:
        self.anchor()  # Textual keeps an anchored view at the end across layouts

    def _stick(self) -> None:
        self.anchor()
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def jump_end(self) -> None:
        self.follow = True
        self.new_while_paused = 0
        self._stick()
        self._post_status()

    def jump_home(self) -> None:
        self.follow = False
        self.scroll_home(animate=False, immediate=True, x_axis=False)

    def on_resize(self, event) -> None:
        if self.wrap:
            self._rebuild()
        elif self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def shown_records(self) -> list:
        """The records shown (after the filter, without the polls kept back), oldest first;
        each TP rank's copy of a folded event too (ctrl+s writes them)."""
        return Selection(self.filter, self.show_polls, fold=False).take(self.known_records())

    # ---- rendering -----------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        idx = scroll_y + y
        width = self.scrollable_content_region.width
        rich_style = self.rich_style
        rows = self.rows
        if idx >= len(rows) or self.store is None:
            return Strip.blank(width, rich_style)
        seq, sub, start = rows.seq[idx], rows.sub[idx], rows.start[idx]
        line_key = seq << SUB_BITS | sub
        current = line_key in (self.search.current, self.mark)
        numbers = self._gutter()
        key = (seq, sub, start, self._gen if (current or self.search.pattern) else 0, current, numbers)
        strip = self._cache.get(key)
        if strip is None:
            rec = self.store.get(seq)
            if rec is None:
                return Strip.blank(width, rich_style)
            text = render_row(
                rec,
                sub,
                start,
                rows.end[idx],
                current=current,
                pattern=self.search.pattern,
                base=rich_style,
                label=self.selection.label(seq) if sub == 0 else None,
                marks=NO_COLOR_MARKS if self.app.no_color else COLOR_MARKS,
            )
            if numbers:
                left = gutter(rec, sub, start, numbers, current)
                left.stylize(rich_style)
                text = left.append_text(text)
            strip = Strip(text.render(self.app.console), cell_len(text.plain))
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style)

    # ---- status ----------------------------------------------------------------------
    def status(self) -> LogViewStatus:
        store = self.store
        sel = self.selection
        return LogViewStatus(
            follow=self.follow,
            new=self.new_while_paused,
            shown=sel.shown,
            total=store.total if store is not None else 0,
            dropped=store.dropped if store is not None else 0,
            truncated=store.truncated if store is not None else 0,
            filter=self.filter.describe(),
            search=self.search.text,
            hits=len(self.search.hits),
            wrap=self.wrap,
            position=self.search.position(),
            polls_hidden=sel.polls_hidden,
            show_polls=self.show_polls,
            folded=sel.folded,
            fold=self.fold,
        )

    def _post_status(self) -> None:
        status = self.status()
        if status != self._status:  # the status line redraws only when what it says changed
            self._status = status
            self.post_message(LogViewChanged(status))
