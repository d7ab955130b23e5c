"""The panels' common base: a widget bound to the server screen's snapshot that redraws only when
the part it shows changes: ``pick`` takes the part from each new snapshot, an equal part
does nothing, and a changed one repaints only the cells that differ from what the panel
shows (line_repaint.py: a figure that moves each second sends its few cells, not the panel).

The part is a plain attribute, not a computed reactive: Textual calls a computed reactive's
watchers on every read, so a ``render`` reading it would mark the panel dirty again (each
change was painted twice)."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.reactive import var
from textual.widget import Widget

from console.widgets.line_repaint import repaint_changed_cells
from server_control.model.snapshot import EMPTY_SNAPSHOT, SessionSnapshot

_UNSET = object()


class SnapshotView(Widget):
    """Bind with ``.data_bind(ServerScreen.snapshot)``; subclasses define ``pick``."""

    snapshot: var[SessionSnapshot] = var(EMPTY_SNAPSHOT)
    LAYOUT = False  # refresh the layout too when the part changes (its height may change)
    _part: Any = _UNSET

    def pick(self, snap: SessionSnapshot) -> Any:
        raise NotImplementedError

    @property
    def part(self) -> Any:
        """What the panel shows (picked from the snapshot)."""
        if self._part is _UNSET:
            self._part = self.pick(self.snapshot)
        return self._part

    def on_part(self, part: Any) -> None:
        """Called when the part changed, before the repaint (subclasses: classes etc.)."""

    def watch_snapshot(self, snap: SessionSnapshot) -> None:
        self.take(self.pick(snap))

    def take(self, part: Any) -> None:
        if self._part is not _UNSET and part == self._part:
            return
        self._part = part
        self.on_part(part)
        if self.LAYOUT or not repaint_changed_cells(self):
            self.refresh(layout=self.LAYOUT)

    def on_resize(self, _event: events.Resize) -> None:
        self._part = self.pick(self.snapshot)  # a part may depend on the width (Textual repaints)
