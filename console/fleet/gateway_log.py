"""The gateway's own log (smg's, `l` on the fleet screen): the single-server screen's log view
(follow, filter, search, line numbers, copy) over the file the gateway's run record names,
followed like tail -F while the screen is open; `escape` (with nothing left to clear in the
view) or `q` closes it."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from console.widgets.log.pane import LogPane
from server_control.logs import LogPipeline, LogStore


class GatewayLogScreen(Screen):
    BINDINGS = [Binding("escape,q", "close", "Back", tooltip="Back to the fleet table")]
    DEFAULT_CSS = "GatewayLogScreen #gateway-log-title { height: 1; padding: 0 1; background: $boost; }"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.store = LogStore()
        self.pipeline = LogPipeline(path, self.store, lambda _seq: self._new())

    def compose(self) -> ComposeResult:
        yield Static(f"gateway log {self.path} (escape: back to the fleet)", id="gateway-log-title")
        yield LogPane(self.store, id="gateway-log")

    def on_mount(self) -> None:
        self.query_one(LogPane).view.focus()
        self.run_worker(self.pipeline.run(), group="gateway-log")

    def _new(self) -> None:
        self.query_one(LogPane).view.notify_new()

    def on_unmount(self) -> None:
        self.pipeline.stop()

    def action_close(self) -> None:
        self.pipeline.stop()
        self.dismiss()
