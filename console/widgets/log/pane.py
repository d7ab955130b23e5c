"""The log view with its one-line status: follow state, new lines, filter, search, counters
(a change repaints only the cells that differ: a count going up sends its digits)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget

from console.messages import LogViewChanged, LogViewStatus
from console.widgets.line_repaint import repaint_changed_cells
from console.widgets.log.view import LogView
from server_control.logs import LogStore


def status_text(st: LogViewStatus) -> Text:
    """FOLLOW/PAUSED, the search (n/of) and the filter the operator typed (first: a narrow
    or busy line cuts its end, never what was asked), then what is shown of what was read,
    what is kept back (and the key that shows it), and only the counters that are not zero."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if st.follow:
        t.append(" FOLLOW ", "bold black on green")
    else:
        t.append(" PAUSED ", "bold black on yellow")
    if st.search:
        t.append("  search: ", "dim")
        where = f"{st.position[0]}/{st.position[1]}" if st.position else f"{st.hits} hits"
        t.append(f"/{st.search}/ {where}", "bold yellow")
    if st.filter:
        t.append("  filter: ", "dim")
        t.append(st.filter, "bold cyan")
    if not st.follow and st.new:
        t.append(f"  {st.new} new lines", "bold yellow")
    t.append(f"  {st.shown} of {st.total} shown")
    if st.show_polls:
        t.append("  polls shown (a hides)", "dim")
    elif st.polls_hidden:
        t.append(f"  {st.polls_hidden} polls hidden (a)", "dim")
    if not st.fold:
        t.append("  TP ranks unfolded (t)", "dim")
    elif st.folded:
        t.append(f"  {st.folded} folded (t)", "dim")
    if st.wrap:
        t.append("  wrap", "cyan")
    if st.dropped:
        t.append(f"  {st.dropped} oldest left memory", "bold red")
    if st.truncated:
        t.append(f"  {st.truncated} long line{'' if st.truncated == 1 else 's'} cut for display", "yellow")
    return t


class LogStatus(Widget):
    DEFAULT_CSS = "LogStatus { height: 1; background: $panel; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def render(self) -> Text:
        return self.text

    def show(self, text: Text) -> None:
        """One line, always: no re-layout; an equal line repaints nothing."""
        if text == self.text:
            return
        self.text = text
        if not repaint_changed_cells(self):
            self.refresh()


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
        self.query_one(LogStatus).show(status_text(message.status))
