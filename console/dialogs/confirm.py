"""Modal questions answered with the keyboard: yes/no, and the quit choice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

if TYPE_CHECKING:
    from server_control.model.run_status import RunStatus


class ChoiceScreen(ModalScreen):
    """A question with buttons; each button has a hot key. Dismisses with the choice's
    value; escape dismisses with ``cancel_value``."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("left", "app.focus_previous", show=False),
        Binding("right", "app.focus_next", show=False),
    ]
    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical { width: auto; max-width: 76; height: auto; border: thick $accent;
                              padding: 1 2; background: $surface; }
    ChoiceScreen Label { width: auto; max-width: 70; margin-bottom: 1; }
    ChoiceScreen Horizontal { width: auto; height: auto; }
    ChoiceScreen Button { margin: 0 1; min-width: 10; }
    """

    def __init__(
        self, question: str, choices: list[tuple[str, str, object]], default: int = 0, cancel_value: object = None
    ) -> None:
        super().__init__()
        self.question = question
        self.choices = choices  # (hot key, label, value)
        self.default = default
        self.cancel_value = cancel_value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="question")
            with Horizontal():
                for i, (key, label, _value) in enumerate(self.choices):
                    yield Button(f"({key}) {label}", id=f"choice-{i}", variant="primary" if i == self.default else "default")

    def on_mount(self) -> None:
        self.query_one(f"#choice-{self.default}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        index = int((event.button.id or "choice-0").split("-")[1])
        self.dismiss(self.choices[index][2])

    def on_key(self, event) -> None:
        for key, _label, value in self.choices:
            if event.key == key:
                event.stop()
                self.dismiss(value)
                return

    def action_cancel(self) -> None:
        self.dismiss(self.cancel_value)


def confirm(question: str, default_yes: bool = False) -> ChoiceScreen:
    return ChoiceScreen(question, [("y", "Yes", True), ("n", "No", False)], default=0 if default_yes else 1, cancel_value=False)


def quit_choice(what: str, kept_by: str = "") -> ChoiceScreen:
    """Quit: stop the server too? Leave it running ("leave", the default: Enter never stops a
    server), stop it ("stop"), or stay (None). ``kept_by``: who restarts its crashes."""
    keeper = kept_by or "nobody restarts a crash (the run has no supervisor)"
    return ChoiceScreen(
        f"Quit the console. Stop the {what} too?\n\nLeave: it keeps serving; {keeper}.\n"
        f"Stop: stop the {what} and all its processes now.",
        [("l", f"Leave {what} running", "leave"), ("s", f"Stop {what}", "stop"), ("c", "Cancel", None)],
        default=0,
        cancel_value=None,
    )


def kept_by(run: RunStatus) -> str:
    """Who restarts the run's crashes, in words ("" when nobody does)."""
    from server_control.supervision.ownership import ROLE_WORDS  # noqa: PLC0415

    who = run.supervisor
    return f"{ROLE_WORDS.get(who.kind, who.kind)} (pid {who.pid}) restarts a crash" if who is not None else ""
