"""The fleet screen's command palette (`ctrl+p`): the fleet's own actions by name, from the
one key table (console/keys.py, owner "fleet"); the single-server actions act on one member
and are not offered here."""

from __future__ import annotations

from console.keys import Action
from console.palette import ConsoleCommands


class FleetCommands(ConsoleCommands):
    OWNERS = frozenset({"fleet"})
    PREFIX = "Fleet: "

    def _run(self, action: Action) -> None:
        self.app.call_later(self.screen.run_action, action.action)
