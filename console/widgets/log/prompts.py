"""The log view's prompts (`&` filter, `/` search, `:` go to line, `ctrl+s` save): what they ask,
how they check the answer (the error shows under the input), and what they do with it.

`ctrl+s` offers a full path in the home directory, named after the profile and the time
(never a bare name that lands wherever the console was started), and asks before it
overwrites a file."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from console.dialogs.confirm import confirm
from console.dialogs.prompt import PromptScreen
from console.widgets.log.format import LineFilter, compile_pattern, record_text
from console.widgets.log.line_numbers import find_line

if TYPE_CHECKING:
    from console.widgets.log.surface import LogSurface


def filter_prompt(view: LogSurface) -> tuple[PromptScreen, Callable[[str | None], None]]:
    def checked(s: str) -> str:
        LineFilter.parse(s)  # raises ValueError: the prompt shows why and stays
        return s

    def done(s: str | None) -> None:
        if s is not None:
            view.set_filter_text(s)

    return PromptScreen("Filter: regex (leading ! inverts, empty clears)", checked, view.filter.prompt_text), done


def search_prompt(view: LogSurface) -> tuple[PromptScreen, Callable[[str | None], None]]:
    def done(s: str | None) -> None:
        if s is not None and not view.search_for(s) and s:
            view.notify(f"no line matches /{s}/", severity="warning")

    def checked(s: str) -> str:
        if s:
            compile_pattern(s)  # raises ValueError: the prompt shows why and stays
        return s

    return PromptScreen("Search: regex (n next, N previous, esc clears)", checked, view.search_text), done


def goto_prompt(view: LogSurface) -> tuple[PromptScreen, Callable[[int | None], None]]:
    """`:` a file line number (what verification cites: "log line 118"): marks it, scrolls to it."""

    def checked(text: str) -> int:
        text = text.strip().removeprefix("log line").strip().rstrip(":")
        if not text.isdigit() or int(text) < 1:
            raise ValueError("a line number (1 or more) is needed")
        return int(text)

    def done(number: int | None) -> None:
        if number is None or view.store is None:
            return
        view.numbers = True
        where = find_line(view.rows, view.store, number)
        if where.row is not None and where.key is not None:
            view.show_row(where.row, where.key)
        if where.why:
            view.notify(where.why, severity="warning", timeout=6)

    return PromptScreen(
        "Go to log line (the file's line number)", checked, "", hint="enter goes, escape cancels; y then copies the line"
    ), done


def default_save_path(name: str) -> Path:
    return Path.home() / f"specconsole-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log"


def write_records(records: list, path: Path) -> int:
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(record_text(rec) + "\n")
    return len(records)


def save_prompt(view: LogSurface) -> tuple[PromptScreen, Callable[[Path | None], None]]:
    def checked(text: str) -> Path:
        if not text.strip():
            raise ValueError("a file name is needed")
        path = Path(text.strip()).expanduser().absolute()
        if not path.parent.is_dir():
            raise ValueError(f"no directory {path.parent}")
        if path.is_dir():
            raise ValueError(f"{path} is a directory")
        return path

    def write(path: Path) -> None:
        try:
            count = write_records(view.shown_records(), path)
        except OSError as exc:
            view.notify(f"cannot write {path}: {exc.strerror or exc}", severity="error", timeout=8)
            return
        view.notify(f"saved {count} records to {path}")

    def done(path: Path | None) -> None:
        if path is None:
            return
        if path.exists():

            def overwrite(yes: object) -> None:
                if yes:
                    write(path)

            view.app.push_screen(confirm(f"{path} exists. Overwrite it?"), overwrite)
        else:
            write(path)

    return (
        PromptScreen(
            "Save the lines shown (after filters) to file",
            checked,
            str(default_save_path(view.save_name)),
            hint="enter saves, escape cancels",
        ),
        done,
    )
