"""The log view with its one-line status: follow state, new lines, filter, search, counters."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from console.messages import LogViewChanged, LogViewStatus
from console.widgets.log_view import LogView
from server_control.logs.store import LogStore


def status_text(st: LogViewStatus) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if st.follow:
        t.append(" FOLLOW ", "bold black on green")
    else:
        t.append(" PAUSED ", "bold black on yellow")
        if st.new:
            t.append(f" {st.new} new lines", "bold yellow")
    t.append(f"  {st.shown} shown")
    if st.filter:
        t.append("  filter: ", "dim")
        t.append(st.filter, "bold cyan")
    if st.search:
        t.append("  search: ", "dim")
        t.append(f"/{st.search}/ {st.hits} hits", "bold yellow")
    if st.wrap:
        t.append("  wrap", "cyan")
    t.append(f"  total {st.total}", "dim")
    dropped, truncated = st.dropped, st.truncated
    t.append("  dropped ", "dim")
    t.append(str(dropped), "bold red" if dropped else "dim")
    t.append("  cut ", "dim")
    t.append(str(truncated), "bold yellow" if truncated else "dim")
    return t


class LogStatus(Static):
    DEFAULT_CSS = "LogStatus { height: 1; background: $panel; }"


class LogPane(Vertical):
    DEFAULT_CSS = "LogPane { height: 1fr; }"

    def __init__(self, store: LogStore | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store = store

    def compose(self) -> ComposeResult:
        yield LogStatus(id="log-status")
        yield LogView(self._store, id="log-view")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_log_view_changed(self, message: LogViewChanged) -> None:
        message.stop()
        self.query_one(LogStatus).update(status_text(message.status))
