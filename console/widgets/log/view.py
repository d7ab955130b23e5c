"""The log view: a Line API widget that renders only the visible rows, and owns the log keys.

Reads records from the session's ``LogStore`` (``since(seq)``), in batches: a notification
schedules one flush ~50 ms later, so a burst of thousands of lines costs one repaint.
``follow`` (a reactive) sticks to the end; scrolling up pauses and counts new lines;
reaching the bottom again (or `f` / `end`) resumes. Filter (hide) and search (highlight and
jump: ``search_for``, ``search_next``, ``search_previous``) are separate. ``wrap`` (a
reactive) wraps long lines; long lines are capped for display only. Polling access lines
are kept back unless ``show_polls`` (`a`), the copies of one event that every TP rank logs
are folded into one row unless ``fold`` is off (`t``): both counted on the status line
(console/widgets/log/select.py). The keys move like less and k9s (j k g G space b ctrl+d
ctrl+u); esc clears; a key that filters says so on the status line.
"""
from __future__ import annotations

import time
from bisect import bisect_left

from rich.cells import cell_len
from textual.actions import SkipAction
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import var
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.actions.table import bindings_for
from console.messages import LogViewChanged, LogViewStatus
from console.widgets.log.format import LineFilter, render_row
from console.widgets.log.prompts import filter_prompt, save_prompt, search_prompt
from console.widgets.log.rows import SUB_BITS, Rows
from console.widgets.log.search import LogSearch
from console.widgets.log.select import Selection
from server_control.logs.store import LogStore

FLUSH_S = 0.05          # a burst of lines is one flush
REDRAW_S = 1.0          # new rows reach the view at most once a second: following, each scroll
                        # repaints every row shown; paused, the scroll bar and the counter move
                        # (over ssh that is the console's traffic: 2/s was 12 KB/s busy)


class LogView(ScrollView, can_focus=True):
    """Rows are integer arrays (``log_rows.Rows``); text comes from the store
    (``store.get(seq)``) only for the rows on screen. The log keys are bound here, from
    the one actions table (console/actions/table.py)."""

    BINDINGS = bindings_for("log")
    DEFAULT_CSS = """
    LogView { background: $surface; overflow-x: auto; overflow-y: scroll; }
    LogView:focus { background-tint: $foreground 4%; }
    """

    follow: var[bool] = var(True, init=False)
    wrap: var[bool] = var(False, init=False)
    show_polls: var[bool] = var(False, init=False)
    fold: var[bool] = var(True, init=False)

    def __init__(self, store: LogStore | None = None, *, save_name: str = "log", id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.save_name = save_name        # ctrl+s offers ~/specconsole-<name>-<time>.log
        self.new_while_paused = 0
        self.filter = LineFilter()
        self.selection = Selection(self.filter)
        self.search = LogSearch()
        self.ranks: list[str] = []
        self.rows = Rows()
        self._last_seq = 0
        self._wrap_width = 0
        self._gen = 0                     # bumps when highlighting changes
        self._flush_pending = False
        self._last_rows = 0.0             # monotonic time of the last flush that added rows
        self._status: LogViewStatus | None = None
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    # ---- search: the public interface ----------------------------------------------
    @property
    def search_text(self) -> str:
        return self.search.text

    @property
    def search_hits(self) -> int:
        return len(self.search.hits)

    def search_for(self, text: str) -> bool:
        """Highlight the lines matching ``text`` (the operator's regex rule) and jump to the
        nearest: the first at or below the top of the view, or, while following the end, the
        last one; empty clears. Raises ValueError on a bad regex. Returns whether anything matched."""
        self.search.set(text)
        self._gen += 1
        if not text:
            self._cache.clear()
            self.refresh()
            self._post_status()
            return False
        self._rebuild()
        if self.follow and self.rows:   # at the end: the nearest match is the last one above it
            return self._show_match(self.search.jump(self.rows.key(len(self.rows) - 1) + 1, forward=False))
        top = int(self.scroll_y)
        return self._show_match(self.search.jump(self.rows.key(top) if top < len(self.rows) else 0))

    def search_next(self) -> bool:
        return self._search_step(True)

    def search_previous(self) -> bool:
        return self._search_step(False)

    def _search_step(self, forward: bool) -> bool:
        if self.search.pattern is None or not self.search.hits:
            return False
        if self.search.current is None:
            top = min(int(self.scroll_y), len(self.rows) - 1)
            return self._show_match(self.search.jump(self.rows.key(top), forward))
        return self._show_match(self.search.step(forward))

    def current_match_row(self) -> int | None:
        """Row index of the current match's first row (None when there is none)."""
        return None if self.search.current is None else self.rows.row_of(self.search.current)

    def _show_match(self, key: int | None) -> bool:
        """Scroll so the match sits a third of the way down, with context around it."""
        self._gen += 1
        row = None if key is None else self.rows.row_of(key)
        if row is not None:
            height = self.scrollable_content_region.height or 1
            if row < len(self.rows) - height:
                self.follow = False
            self.scroll_to(y=max(0, min(row - height // 3, self.max_scroll_y)), animate=False, immediate=True)
            self.refresh()
        self._post_status()
        return key is not None

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
        hits = self.rows.add(self.selection.take(records), None, self._wrap_width if self.wrap else 0,
                             self.search.pattern)
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
            self.set_reactive(LogView.virtual_size, size)
            self.refresh(repaint=False, layout=True)

    def _rebuild(self) -> None:
        """Recompute rows after a filter/wrap/size/search change, keeping the top record in view."""
        top_y = int(self.scroll_y)
        top = self.rows.seq[top_y] if top_y < len(self.rows) else None
        self._wrap_width = max(10, self.scrollable_content_region.width or self.size.width or 80)
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

    def action_half_page(self, direction: int) -> None:
        """ctrl+d / ctrl+u: half a screen down / up (less, vi)."""
        step = max(1, (self.scrollable_content_region.height or 2) // 2)
        self.scroll_to(y=max(0, min(self.max_scroll_y, self.scroll_y + direction * step)), animate=False,
                       immediate=True)

    def on_resize(self, event) -> None:
        if self.wrap:
            self._rebuild()
        elif self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # ---- filter and quick filters --------------------------------------------------
    def set_filter_text(self, text: str) -> None:
        """`/` input. Raises ValueError (bad regex) and leaves the old filter in place."""
        self.filter = LineFilter.parse(text, self.filter)
        self._rebuild()

    def action_log_rank(self) -> None:
        """One rank at a time: none -> each rank seen in the records (TP0, TP1, ...) -> none."""
        seen = {rec.rank.split()[-1] for rec in self.known_records() if rec.rank}
        self.ranks = sorted(seen)
        choices = [None, *self.ranks]
        pos = choices.index(self.filter.rank) if self.filter.rank in choices else 0
        self.filter.rank = choices[(pos + 1) % len(choices)]
        self._rebuild()
        self.notify(f"rank filter: {self.filter.rank} only (R: next rank, esc clears)" if self.filter.rank
                    else "rank filter off", timeout=3)

    def clear_all(self) -> None:
        self.filter = LineFilter()
        self.search.clear()
        self._gen += 1
        self._rebuild()

    # ---- the log keys (console/actions/table.py, target "log") ---------------------------
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Under a modal screen (a prompt, the help) the log keys are off, as the app's are."""
        return not isinstance(self.app.screen, ModalScreen)

    def action_log_follow(self) -> None:
        if self.follow:
            self.follow = False
        else:
            self.jump_end()

    def action_log_end(self) -> None:
        self.jump_end()

    def action_log_home(self) -> None:
        self.jump_home()

    def action_log_filter(self) -> None:
        self.app.push_screen(*filter_prompt(self))

    def action_log_search(self) -> None:
        self.app.push_screen(*search_prompt(self))

    def action_log_next(self) -> None:
        self.search_next()

    def action_log_prev(self) -> None:
        self.search_previous()

    def action_log_clear(self) -> None:
        if not self.filter.active and self.search.pattern is None:
            raise SkipAction()  # nothing to clear: the key goes on to the screen and the app
        self.clear_all()

    def action_log_errors(self) -> None:
        self.filter.errors_only = not self.filter.errors_only
        self._rebuild()

    def action_log_hide_stats(self) -> None:
        self.filter.hide_stats = not self.filter.hide_stats
        self._rebuild()

    def action_log_polls(self) -> None:
        self.show_polls = not self.show_polls

    def action_log_fold(self) -> None:
        self.fold = not self.fold

    def action_log_wrap(self) -> None:
        self.wrap = not self.wrap

    def action_log_save(self) -> None:
        self.app.push_screen(*save_prompt(self))

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
        current = self.search.current is not None and self.search.current == (seq << SUB_BITS | sub)
        key = (seq, sub, start, self._gen if (current or self.search.pattern) else 0, current)
        strip = self._cache.get(key)
        if strip is None:
            rec = self.store.get(seq)
            if rec is None:
                return Strip.blank(width, rich_style)
            text = render_row(rec, sub, start, rows.end[idx], current=current, pattern=self.search.pattern,
                              base=rich_style, label=self.selection.label(seq) if sub == 0 else None)
            strip = Strip(text.render(self.app.console), cell_len(text.plain))
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style)

    # ---- status ----------------------------------------------------------------------
    def status(self) -> LogViewStatus:
        store = self.store
        sel = self.selection
        return LogViewStatus(
            follow=self.follow, new=self.new_while_paused, shown=sel.shown,
            total=store.total if store is not None else 0, dropped=store.dropped if store is not None else 0,
            truncated=store.truncated if store is not None else 0, filter=self.filter.describe(),
            search=self.search.text, hits=len(self.search.hits), wrap=self.wrap,
            position=self.search.position(), polls_hidden=sel.polls_hidden, show_polls=self.show_polls,
            folded=sel.folded, fold=self.fold)

    def _post_status(self) -> None:
        status = self.status()
        if status != self._status:   # the status line redraws only when what it says changed
            self._status = status
            self.post_message(LogViewChanged(status))
