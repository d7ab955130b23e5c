"""A one-line prompt with validation: the error shows under the input, nothing crashes."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class PromptScreen(ModalScreen):
    """Dismisses with ``validate(text)``'s result, or None on escape. ``validate`` raises
    ValueError with the reason for a bad value; the reason is shown and the prompt stays."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    PromptScreen { align: center middle; }
    PromptScreen > Vertical { width: 70; height: auto; border: thick $accent; padding: 1 2;
                              background: $surface; }
    PromptScreen Label { width: 100%; }
    PromptScreen #error { color: $error; height: auto; }
    PromptScreen #hint { color: $text-muted; height: auto; }
    """

    def __init__(self, title: str, validate: Callable[[str], object], value: str = "", hint: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.validate = validate
        self.value = value
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text)
            yield Input(value=self.value, id="prompt-input")
            yield Label(self.hint, id="hint")
            yield Label("", id="error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            result = self.validate(event.value)
        except ValueError as exc:
            self.query_one("#error", Label).update(str(exc))
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        self.dismiss(None)
