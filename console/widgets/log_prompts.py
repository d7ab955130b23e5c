"""The log view's prompts (`/` filter, `ctrl+f` search, `ctrl+s` save): what they ask,
how they check the answer (the error shows under the input), and what they do with it."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from console.screens.prompt import PromptScreen
from console.widgets.log_format import LineFilter, compile_pattern

if TYPE_CHECKING:
    from console.widgets.log_view import LogView


def filter_prompt(view: LogView) -> tuple[PromptScreen, Callable[[str | None], None]]:
    f = view.filter
    current = ("!" if f.invert else "") + f.text if f.pattern else ""

    def checked(s: str) -> str:
        LineFilter.parse(s)   # raises ValueError: the prompt shows why and stays
        return s

    def done(s: str | None) -> None:
        if s is not None:
            view.set_filter_text(s)
    return PromptScreen("Filter: regex (leading ! inverts, empty clears)", checked, current), done


def search_prompt(view: LogView) -> tuple[PromptScreen, Callable[[str | None], None]]:
    def done(s: str | None) -> None:
        if s is not None and not view.search_for(s) and s:
            view.notify(f"no line matches /{s}/", severity="warning")
    def checked(s: str) -> str:
        if s:
            compile_pattern(s)   # raises ValueError: the prompt shows why and stays
        return s
    return PromptScreen("Search: regex (n next, N previous, esc clears)", checked, view.search_text), done


def save_prompt(view: LogView) -> tuple[PromptScreen, None]:
    def save(path: str) -> str:
        if not path.strip():
            raise ValueError("a file name is needed")
        try:
            count = view.save(path.strip())
        except OSError as exc:
            raise ValueError(f"cannot write {path!r}: {exc.strerror or exc}") from None
        view.notify(f"saved {count} records to {path.strip()}")
        return path
    return PromptScreen("Save the lines shown to file", save, f"specconsole-{view.save_name}-shown.log"), None
