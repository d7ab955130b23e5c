"""The log view: the rows of the session's log store on screen (``LogLines``,
console/widgets/log/lines.py) and what the operator does with them: the log keys (bound
here, from the one actions table, console/keys.py), the filter and the quick
filters, and the search (highlight and jump: ``search_for``, ``search_next``,
``search_previous``). Filter (hide) and search (highlight and jump) are separate. The keys
move like less and k9s (j k g G space b ctrl+d ctrl+u), without animation (an animation
racing the follow logic would fight it, and over SSH every frame costs); `f` / `end`
resume following; esc clears; a key that filters says so on the status line.
"""

from __future__ import annotations

from textual.actions import SkipAction
from textual.screen import ModalScreen

from console.keys import bindings_for
from console.widgets.log.format import LineFilter
from console.widgets.log.line_numbers import goto_init, yank
from console.widgets.log.lines import LogLines
from console.widgets.log.prompts import filter_prompt, goto_prompt, save_prompt, search_prompt


class LogView(LogLines, can_focus=True):
    """The log keys are bound here; filter, search and folding act on the rows below."""

    BINDINGS = bindings_for("log")
    DEFAULT_CSS = """
    LogView { background: $surface; overflow-x: auto; overflow-y: scroll; }
    LogView:focus { background-tint: $foreground 4%; }
    """

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
        self.mark = None
        self._gen += 1
        if not text:
            self._cache.clear()
            self.refresh()
            self._post_status()
            return False
        self._rebuild()
        if self.follow and self.rows:  # at the end: the nearest match is the last one above it
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
        self.mark = None
        if self.search.current is None:
            top = min(int(self.scroll_y), len(self.rows) - 1)
            return self._show_match(self.search.jump(self.rows.key(top), forward))
        return self._show_match(self.search.step(forward))

    def current_match_row(self) -> int | None:
        """Row index of the current match's first row (None when there is none)."""
        return None if self.search.current is None else self.rows.row_of(self.search.current)

    def _show_match(self, key: int | None) -> bool:
        """Scroll so the match sits a third of the way down, with context around it, and
        pause following wherever it lands (in the last screenful too, or while the whole log
        fits the screen): the next lines must not push the line the operator asked for away."""
        self._gen += 1
        row = None if key is None else self.rows.row_of(key)
        if row is not None:
            height = self.scrollable_content_region.height or 1
            self.scroll_to(y=max(0, min(row - height // 3, self.max_scroll_y)), animate=False, immediate=True)
            self.follow = False  # after the scroll: a scroll down to the end would resume following
            self.refresh()
        self._post_status()
        return key is not None

    # ---- keyboard scrolling, without animation -------------------------------------
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
        self.scroll_to(y=max(0, min(self.max_scroll_y, self.scroll_y + direction * step)), animate=False, immediate=True)

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
        self.notify(
            f"rank filter: {self.filter.rank} only (R: next rank, esc clears)" if self.filter.rank else "rank filter off",
            timeout=3,
        )

    def clear_all(self) -> None:
        self.filter = LineFilter()
        self.search.clear()
        self.mark = None
        self._gen += 1
        self._rebuild()

    # ---- the log keys (console/keys.py, target "log") ---------------------------
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
        if not self.filter.active and self.search.pattern is None and self.mark is None:
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

    def show_row(self, row: int, key: int) -> None:
        """Make ``key`` (at ``row``) the current line and scroll it a third of the way down."""
        self.mark = key
        self.search.current = None
        self._show_match(key)

    def action_log_numbers(self) -> None:
        self.numbers = not self.numbers

    def action_log_goto(self) -> None:
        self.app.push_screen(*goto_prompt(self))

    def action_log_init(self) -> None:
        goto_init(self)

    def action_log_yank(self) -> None:
        yank(self)

    def action_log_save(self) -> None:
        self.app.push_screen(*save_prompt(self))
