"""The fleet screen's command palette (`ctrl+p`): the fleet's own actions by name, from its
key bindings (the single-server actions act on one member and are not offered here)."""

from __future__ import annotations

from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider


def _entries(screen) -> list[tuple[str, str, str]]:
    """(text, title, action) for every fleet binding with a description."""
    out = []
    for b in getattr(screen, "BINDINGS", ()):
        if isinstance(b, Binding) and b.tooltip:
            keys = b.key.replace(",", " ").replace("equals_sign", "=").replace("question_mark", "?")
            keys = keys.replace("slash", "/").replace("plus", "+").replace("minus", "-")
            keys = keys.replace("right_square_bracket", "]").replace("left_square_bracket", "[")
            out.append((f"Fleet: {b.tooltip} ({keys})", b.description, b.action))
    return out


class FleetCommands(Provider):
    def _run(self, action: str) -> None:
        self.app.call_later(self.screen.run_action, action)

    async def discover(self) -> Hits:
        for text, title, action in _entries(self.screen):
            yield DiscoveryHit(text, partial(self._run, action), help=title)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, title, action in _entries(self.screen):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(self._run, action), help=title)
