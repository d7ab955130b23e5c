"""`?` on the fleet screen: the fleet's own keys (the key table's "fleet" rows,
console/keys.py) and the table's motion keys, not the single-server screen's (those act on
one member: enter opens it)."""

from __future__ import annotations

from rich.table import Table

from console.keys import actions_of, key_text
from console.screens.help import HelpScreen

MOTION = (("j / down, k / up", "Move the cursor one member"), ("pgdn / pgup", "Ten members"), ("g / G", "First / last member"))


def fleet_help_table() -> Table:
    table = Table(box=None, padding=(0, 2), show_header=False, expand=True)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("what")
    table.add_row("[bold underline]Fleet[/]", "keys act on the selected members (space), or on every member shown")
    for a in actions_of(frozenset({"fleet"})):
        table.add_row(key_text(a), a.help)
    table.add_row("", "")
    table.add_row("[bold underline]Table[/]", "")
    for key, what in MOTION:
        table.add_row(key, what)
    return table


class FleetHelpScreen(HelpScreen):
    def page(self) -> Table:
        return fleet_help_table()
