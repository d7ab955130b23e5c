"""The panels' common base: a widget bound to the server screen's snapshot that redraws only when
the part it shows changes (Textual's compute + watch: ``compute_part`` picks the part,
the reactive compares it with the last one, ``watch_part`` refreshes)."""
from __future__ import annotations

from typing import Any

from textual.reactive import var
from textual.widget import Widget

from server_control.model.snapshot import EMPTY_SNAPSHOT, SessionSnapshot


class SnapshotView(Widget):
    """Bind with ``.data_bind(ServerScreen.snapshot)``; subclasses define ``pick``."""

    snapshot: var[SessionSnapshot] = var(EMPTY_SNAPSHOT)
    part: var[Any] = var(None)
    LAYOUT = False  # refresh the layout too when the part changes (its height may change)

    def pick(self, snap: SessionSnapshot) -> Any:
        raise NotImplementedError

    def compute_part(self) -> Any:
        return self.pick(self.snapshot)

    def watch_part(self, part: Any = None) -> None:
        self.refresh(layout=self.LAYOUT)
