"""One line over the advice strip: TTFT / ITL / e2e / queue p50/p95/p99 over the last 15 s
(server_control/model/latency.py), from the server's own /metrics histograms; the stall flag
in red. Without the histograms it says why (SGLang: `--enable-metrics`), dimmed."""

from __future__ import annotations

from rich.text import Text

from console.widgets.snapshot_view import SnapshotView
from server_control.model.latency import LatencyStatus, compact
from server_control.model.snapshot import SessionSnapshot

WINDOW_S = 15.0


class LatencyLine(SnapshotView):
    DEFAULT_CSS = "LatencyLine { height: 1; padding: 0 1; }"

    def pick(self, snap: SessionSnapshot) -> LatencyStatus | None:
        if snap.server.foreign or not snap.server.reachable:
            return None
        return snap.server.latency

    def render(self) -> Text:
        status = self.part
        if status is None:
            return Text("")
        text = compact(status, WINDOW_S)
        if not status.available:
            return Text(text, style="dim", no_wrap=True, overflow="ellipsis")
        head, _, stall = text.partition("  STALL: ")
        out = Text(head, no_wrap=True, overflow="ellipsis")
        if stall:
            out.append(f"  STALL: {stall}", style="bold red")
        return out
