"""The main screen (the app's default screen): its footer lists the keys in the order of
the actions table (console/actions/table.py: what matters most first, so a narrow terminal still
shows it), whichever widget owns them; Textual would list the focused widget's first."""
from __future__ import annotations

from textual.screen import Screen

from console.actions.table import footer_rank


class MainScreen(Screen):
    @property
    def active_bindings(self):  # type: ignore[override]  # same type, our order
        found = super().active_bindings
        return dict(sorted(found.items(), key=lambda item: footer_rank(item[1].binding.action)))
