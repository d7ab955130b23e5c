"""`?`: every key of the console, from the same table as the footer and the palette."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.keys import ACTIONS, key_text

GROUPS = (
    ("threshold", "Threshold and mode"),
    ("server", "Server"),
    ("log", "Log view"),
    ("chart", "Chart"),
    ("console", "Console"),
)
EXTRA = (
    ("log", "up/down pgup/pgdn", "Scroll the log (scrolling up pauses following; the end resumes it)"),
    ("console", "ctrl+p", "Command palette: every action by name"),
    ("console", "up/down", "With the verification checklist focused: choose a layer, read its evidence"),
)


def help_table() -> Table:
    table = Table(box=None, padding=(0, 2), show_header=False, expand=True)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("what")
    for group, title in GROUPS:
        table.add_row(f"[bold underline]{title}[/]", "")
        for a in ACTIONS:
            if a.group == group:
                table.add_row(key_text(a), a.help)
        for g, key, text in EXTRA:
            if g == group:
                table.add_row(key, text)
        table.add_row("", "")
    return table


class ReadingScreen(ModalScreen):
    """A modal page of text to read and scroll, closed by esc or q (and the key of its
    subclass): the help and the details screen (console/screens/details.py)."""

    BINDINGS = [Binding("escape,q", "dismiss_page", "Close")]
    DEFAULT_CSS = """
    ReadingScreen { align: center middle; }
    ReadingScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: thick $accent;
                                     background: $surface; padding: 0 1; }
    """
    PAGE_ID = "page"

    def page(self) -> RenderableType:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.page(), id=self.PAGE_ID)

    def action_dismiss_page(self) -> None:
        self.dismiss(None)


class HelpScreen(ReadingScreen):
    BINDINGS = [Binding("question_mark", "dismiss_page", "Close")]
    PAGE_ID = "help-table"

    def page(self) -> RenderableType:
        return help_table()
