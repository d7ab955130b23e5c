"""Each fleet member's own suggestion, on one line of the fleet screen, and the plan that
`A` applies (each member's own N, after a yes, through the fleet's ``threshold`` action:
``Session.set_threshold``, read back on every rank, journaled).

Every ``EVERY_S`` seconds every member's ``/server_info`` is read in threads (the capped,
deadlined read of ``advice/source.py``) and estimated; a member that does not answer keeps
no suggestion and is named as such."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from server_control.advice.source import SourceError, read_advice
from server_control.advice.words import Advice

EVERY_S = 30.0


def _reader(member: object, url: str) -> Callable[[], Awaitable[Advice]]:
    """The member's session's ``advice`` (its key, only its own server), else a plain read of ``url``."""
    session = getattr(member, "session", None)
    if session is not None:
        return session.advice  # type: ignore[no-any-return]
    return lambda: asyncio.to_thread(read_advice, url)


class FleetAdvice(Static):
    DEFAULT_CSS = "FleetAdvice { height: auto; max-height: 3; padding: 0 1; }"

    seen: reactive[dict[str, Advice | str]] = reactive(dict, always_update=True, layout=True)

    def __init__(
        self, members: Callable[[], Iterable[tuple[str, str, object]]], *, every_s: float = EVERY_S, id: str | None = None
    ) -> None:
        """``members``: (name, url, member object or None) of the members to read."""
        super().__init__(id=id)
        self.members, self.every_s = members, every_s

    def on_mount(self) -> None:
        self.run_worker(self._loop(), group="fleet-advice", exclusive=True)

    async def _read(self, read: Callable[[], Awaitable[Advice]]) -> Advice | str:
        try:
            return await read()
        except SourceError as exc:
            return f"no answer ({exc})"

    async def _loop(self) -> None:
        while True:
            todo = [(name, url, _reader(m, url)) for name, url, m in self.members() if url]
            got = await asyncio.gather(*(self._read(read) for _n, _u, read in todo))
            self.seen = {name: adv for (name, _u, _k), adv in zip(todo, got)}
            await asyncio.sleep(self.every_s)

    def plan(self, names: Iterable[str]) -> dict[str, Advice]:
        """The members of ``names`` whose own suggestion differs from their current N."""
        out = {}
        for name in names:
            adv = self.seen.get(name)
            if isinstance(adv, Advice) and adv.suggested is not None and adv.suggested != adv.current:
                out[name] = adv
        return out

    def render(self) -> Text:
        if not self.seen:
            return Text("advice: reading every member's cost curves", style="dim")
        out = Text("advice: ", style="dim")
        for i, (name, adv) in enumerate(sorted(self.seen.items())):
            if i:
                out.append(" | ", style="dim")
            out.append(f"{name} ", style="bold")
            if isinstance(adv, str):
                out.append(adv, style="dim")
            elif adv.suggested is None:
                out.append("not enough data yet", style="dim")
            elif adv.suggested == adv.current:
                out.append(f"N={adv.current} is right")
            else:
                gain = f" ({adv.gain * 100:+.0f}%)" if adv.gain is not None else ""
                out.append(f"N={adv.current} -> {adv.suggested}{gain}", style="" if adv.confident else "italic")
        out.append("   A applies each member's own (asks)", style="dim")
        return out
