"""One line under the status bar: why the server is in its mode (server_control/model/mode_reason.py)."""

from __future__ import annotations

from rich.text import Text

from console.widgets.snapshot_view import SnapshotView
from server_control.model.mode_reason import mode_reason
from server_control.model.snapshot import SessionSnapshot


class ModeReason(SnapshotView):
    DEFAULT_CSS = "ModeReason { height: 1; padding: 0 1; color: $text-muted; }"

    def pick(self, snap: SessionSnapshot) -> str:
        if snap.server.foreign or not snap.server.reachable:
            return ""
        return mode_reason(snap.spec, snap.live.batch)

    def render(self) -> Text:
        return Text(f"why: {self.part}" if self.part else "", no_wrap=True, overflow="ellipsis")
