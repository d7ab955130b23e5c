"""Command palette provider (`ctrl+p`): every console action by name."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Protocol, cast

from textual.app import App, SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.dom import DOMNode

from console.keys import PALETTE_EXCLUDE, SERVER_OWNERS, Action, actions_of, key_text


class ActionOwners(Protocol):
    """What the palette needs of its screen: the node that runs an owner's actions."""

    def action_owner(self, owner: str) -> DOMNode: ...


class ConsoleCommands(Provider):
    """The server screen's commands (its ``COMMANDS``): the actions of the owners it holds
    (``OWNERS``), each run on the node that owns it (``screen.action_owner(owner)``)."""

    OWNERS: frozenset[str] = SERVER_OWNERS
    PREFIX = ""

    def _actions(self) -> list[Action]:
        return [a for a in actions_of(self.OWNERS) if a.action not in PALETTE_EXCLUDE]

    def _run(self, action: Action) -> None:
        screen = cast(ActionOwners, self.screen)
        self.app.call_later(self.app.run_action, action.action, screen.action_owner(action.owner))

    def _text(self, action: Action) -> str:
        return f"{self.PREFIX}{action.help} ({key_text(action)})"

    async def discover(self) -> Hits:
        for a in self._actions():
            yield DiscoveryHit(self._text(a), partial(self._run, a), help=a.title)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for a in self._actions():
            text = self._text(a)
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(self._run, a), help=a.title)


def system_commands(app: App, found: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
    """Textual's own palette entries, less its "Quit" (ours asks what happens to the server)
    and with a "Screenshot" that saves into the home directory and says where."""

    def screenshot() -> None:
        try:
            path = app.save_screenshot(path=str(Path.home()))
        except OSError as exc:
            app.notify(f"screenshot failed: {exc}", severity="error")
            return
        app.notify(f"screenshot saved: {path}")

    for cmd in found:
        if cmd.title == "Screenshot":
            yield SystemCommand(
                "Screenshot",
                "Save an SVG screenshot of the screen in your home directory",
                lambda: app.set_timer(0.1, screenshot),
            )
        elif cmd.title != "Quit":
            yield cmd
