"""The advisor's always-visible strip on the single-server screen: one line with the
suggestion's sentence (or what data is missing), refreshed every ``EVERY_S`` seconds through
the session's ``advice`` (the cost curves of its last poll, estimated in a thread: no request
of its own). Hidden until the server has answered once (a server that is not up
yet, or a port nothing listens on, leaves the screen as it was); after that a failed read
is said on the strip. When the server's N changes (a key, `A`'s apply, the tuner, another
client) the strip reads again at once instead of speaking of the old N for up to
``EVERY_S``. `A` opens the full view, which applies the suggestion."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from server_control.advice.source import SourceError
from server_control.advice.words import Advice

EVERY_S = 30.0
RETRY_S = 2.0  # until the server's own advice with an N (its first poll, its first steps, may not have come yet)


class AdviceStrip(Static):
    DEFAULT_CSS = "AdviceStrip { height: 1; padding: 0 1; }"

    advice: reactive[Advice | None] = reactive(None, always_update=True)
    note: reactive[str] = reactive("advice: reading the server's cost curves")

    def __init__(self, read: Callable[[], Awaitable[Advice]], *, every_s: float = EVERY_S, id: str | None = None) -> None:
        """``read``: the session's ``advice`` (SourceError when there is none to give)."""
        super().__init__(id=id)
        self.read, self.every_s = read, every_s
        self._again = asyncio.Event()
        self._asked_for: int | None = None  # the N a read was last asked for (once per N)

    def threshold_seen(self, n: int | None) -> None:
        """The server's N as last polled: an N the advice does not speak of reads again now
        (once per N: advice that still lags, from saved curves, waits its turn)."""
        adv = self.advice
        if n is not None and adv is not None and adv.current is not None and adv.current != n and n != self._asked_for:
            self._asked_for = n
            self._again.set()

    def on_mount(self) -> None:
        self.display = False
        self.run_worker(self._loop(), group="advice-strip", exclusive=True)

    async def _loop(self) -> None:
        while True:
            try:
                adv = await self.read()
            except SourceError as exc:
                self.note = f"advice: {exc}"
            else:
                self.advice = adv
                self.display = True
            # the server's own curves with a suggestion: every ``every_s``; until then (saved
            # curves, or "not enough data yet" in a console's first seconds) every RETRY_S
            shown = self.advice
            live = shown is not None and not shown.saved_only and shown.suggested is not None
            self._again.clear()
            try:
                await asyncio.wait_for(self._again.wait(), self.every_s if live else min(self.every_s, RETRY_S))
            except TimeoutError:
                pass

    def render(self) -> Text:
        adv = self.advice
        if adv is None:
            return Text(self.note, style="dim", overflow="ellipsis", no_wrap=True)
        out = Text("advice: ", style="dim", overflow="ellipsis", no_wrap=True)
        out.append(adv.sentence, style="bold" if adv.confident else "")
        out.append("  (A: view, apply)", style="dim")
        return out
