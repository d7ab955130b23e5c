"""Command palette provider (`ctrl+p`): every console action by name."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.bindings import ACTIONS, PALETTE_EXCLUDE, key_text


class ConsoleCommands(Provider):
    def _actions(self):
        return [a for a in ACTIONS if a.action not in PALETTE_EXCLUDE]

    def _run(self, action: str) -> None:
        self.app.call_later(self.app.run_action, action)

    async def discover(self) -> Hits:
        for a in self._actions():
            yield DiscoveryHit(f"{a.help} ({key_text(a)})", partial(self._run, a.action), help=a.title)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for a in self._actions():
            text = f"{a.help} ({key_text(a)})"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(self._run, a.action), help=a.title)
