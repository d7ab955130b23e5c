"""Command palette provider (`ctrl+p`): every console action by name."""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.bindings import ACTIONS, PALETTE_EXCLUDE, Action, key_text

if TYPE_CHECKING:
    from console.app import SpecConsoleApp


class ConsoleCommands(Provider):
    """Runs each action on the widget that owns it (``app.action_target(target)``)."""

    def _actions(self) -> list[Action]:
        return [a for a in ACTIONS if a.action not in PALETTE_EXCLUDE]

    def _run(self, action: Action) -> None:
        app = cast("SpecConsoleApp", self.app)
        app.call_later(app.run_action, action.action, app.action_target(action.target))

    async def discover(self) -> Hits:
        for a in self._actions():
            yield DiscoveryHit(f"{a.help} ({key_text(a)})", partial(self._run, a), help=a.title)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for a in self._actions():
            text = f"{a.help} ({key_text(a)})"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(self._run, a), help=a.title)
