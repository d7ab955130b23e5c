"""The log view's actions (key bindings in console/bindings.py), mixed into the app."""
from __future__ import annotations

from console.screens.prompt import PromptScreen
from console.widgets.log_format import LineFilter, compile_pattern


class LogActions:
    """Needs ``self.log_view`` (LogView), ``self.snap``, ``push_screen`` and ``notify``."""

    # ---- log view --------------------------------------------------------------------
    def action_log_follow(self) -> None:
        self.log_view.toggle_follow()

    def action_log_end(self) -> None:
        self.log_view.jump_end()

    def action_log_home(self) -> None:
        self.log_view.jump_home()

    def action_log_filter(self) -> None:
        view = self.log_view
        current = ("!" if view.filter.invert else "") + view.filter.text if view.filter.pattern else ""
        self.push_screen(PromptScreen("Filter: regex (leading ! inverts, empty clears)",
                                      lambda s: (LineFilter.parse(s), s)[1], current),
                         lambda s: s is not None and view.set_filter_text(s))

    def action_log_search(self) -> None:
        def checked(s: str) -> str:
            if s:
                compile_pattern(s)
            return s

        def done(s: str | None) -> None:
            if s is not None and not self.log_view.set_search(s) and s:
                self.notify(f"no line matches /{s}/", severity="warning")
        self.push_screen(PromptScreen("Search: regex (n next, N previous, esc clears)", checked,
                                      self.log_view.search_text), done)

    def action_log_next(self) -> None:
        self.log_view.search_step(forward=True)

    def action_log_prev(self) -> None:
        self.log_view.search_step(forward=False)

    def action_log_clear(self) -> None:
        self.log_view.clear_all()

    def action_log_errors(self) -> None:
        self.log_view.toggle_errors_only()

    def action_log_hide_stats(self) -> None:
        self.log_view.toggle_hide_stats()

    def action_log_rank(self) -> None:
        self.log_view.cycle_rank()

    def action_log_wrap(self) -> None:
        self.log_view.toggle_wrap()

    def action_log_save(self) -> None:
        default = f"specconsole-{self.snap.get('profile') or 'log'}-shown.log"

        def save(path: str) -> str:
            if not path.strip():
                raise ValueError("a file name is needed")
            try:
                count = self.log_view.save(path.strip())
            except OSError as exc:
                raise ValueError(f"cannot write {path!r}: {exc.strerror or exc}") from None
            self.notify(f"saved {count} records to {path.strip()}")
            return path
        self.push_screen(PromptScreen("Save the lines shown to file", save, default))
