"""The advisor's full-screen view (`A`): the suggested N from the server's cost curves,
refreshed every ``EVERY_S`` seconds while open; enter applies it after a yes, through the
same call as `=` (read back on every rank, journaled); escape closes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen

from console.dialogs.confirm import confirm
from console.widgets.advice_panel import AdvicePanel
from server_control.advice.source import SourceError
from server_control.advice.words import Advice

EVERY_S = 10.0


class AdviceScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("enter", "apply", "Apply N")]
    DEFAULT_CSS = """
    AdviceScreen { align: center middle; }
    AdviceScreen > Vertical { width: 96; height: auto; border: thick $accent; background: $surface; }
    AdviceScreen AdvicePanel { max-height: 12; }
    """

    def __init__(self, read: Callable[[], Awaitable[Advice]], apply: Callable[[int], None]) -> None:
        """``read``: the session's ``advice`` (SourceError when there is none to give)."""
        super().__init__()
        self.read, self._apply = read, apply
        self.advice: Advice | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield AdvicePanel(id="advice")

    def on_mount(self) -> None:
        self.run_worker(self._loop(), group="advice", exclusive=True)

    async def _loop(self) -> None:
        panel = self.query_one(AdvicePanel)
        while True:
            try:
                adv = await self.read()
            except SourceError as exc:
                panel.note = f"advisor: {exc}"
            else:
                self.advice = adv
                panel.note = "enter applies the suggested N (asks first), escape closes"
                panel.advice = adv
            await asyncio.sleep(EVERY_S)

    def action_apply(self) -> None:
        adv = self.advice
        if adv is None or adv.suggested is None:
            self.notify("no advice yet: the cost curves have too little data", severity="warning")
            return
        if adv.current == adv.suggested:
            self.notify(f"N={adv.current} is already the suggestion")
            return
        n = adv.suggested
        caution = "" if adv.confident else " (not confident: see the sentence)"
        self.app.push_screen(confirm(f"Set N={n}{caution}?\n{adv.sentence}"), lambda yes: self._answer(yes, n))

    def _answer(self, yes: object, n: int) -> None:
        if yes:
            self._apply(n)
            self.dismiss()
