"""The advisor's full-screen view (`A`): the suggested N from the server's cost curves,
refreshed every ``EVERY_S`` seconds while open; enter applies it after a yes, through the
same call as `=` (read back on every rank, journaled); escape closes."""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen

from console.screens.confirm import confirm
from console.widgets.advice_panel import AdvicePanel
from server_control.advice.estimate import estimate
from server_control.advice.source import SourceError, read_server
from server_control.advice.words import Advice, advise

EVERY_S = 10.0


def read_advice(url: str, key: str | None) -> Advice:
    """Blocking (run it in a thread): read, estimate, advise. SourceError if unreadable."""
    reading = read_server(url, key)
    return advise(estimate(reading.curves), reading.threshold)


class AdviceScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("enter", "apply", "Apply N")]
    DEFAULT_CSS = """
    AdviceScreen { align: center middle; }
    AdviceScreen > Vertical { width: 96; height: auto; border: thick $accent; background: $surface; }
    AdviceScreen AdvicePanel { max-height: 12; }
    """

    def __init__(self, url: str, key: str | None, apply: Callable[[int], None]) -> None:
        super().__init__()
        self.url, self.key, self._apply = url, key, apply
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
                adv = await asyncio.to_thread(read_advice, self.url, self.key)
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
