"""`?` on the fleet screen: the fleet's own keys (FleetScreen.BINDINGS and the table's
motion keys), not the single-server screen's (those act on one member: enter opens it)."""

from __future__ import annotations

from rich.table import Table

from console.screens.help import HelpScreen

MOTION = (("j / down, k / up", "Move the cursor one member"), ("pgdn / pgup", "Ten members"), ("g / G", "First / last member"))
WORDS = {
    "space": "space",
    "equals_sign": "=",
    "plus": "+",
    "minus": "-",
    "slash": "/",
    "escape": "esc",
    "question_mark": "?",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
}


def fleet_help_table(bindings) -> Table:
    table = Table(box=None, padding=(0, 2), show_header=False, expand=True)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("what")
    table.add_row("[bold underline]Fleet[/]", "keys act on the selected members (space), or on every member shown")
    for b in bindings:
        keys = " ".join(WORDS.get(k, k) for k in b.key.split(","))
        table.add_row(keys, b.tooltip or b.description)
    table.add_row("", "")
    table.add_row("[bold underline]Table[/]", "")
    for key, what in MOTION:
        table.add_row(key, what)
    return table


class FleetHelpScreen(HelpScreen):
    def __init__(self, bindings) -> None:
        super().__init__()
        self.fleet_bindings = bindings

    def page(self) -> Table:
        return fleet_help_table(self.fleet_bindings)
