"""What the log view's helpers (go-to-line, yank and the init line in line_numbers.py, the
prompts in prompts.py) use of the view: a narrow port, so that they hold no reference back
to ``LogView`` (console/widgets/log/view.py), which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.geometry import Region
    from textual.notifications import SeverityLevel

    from console.widgets.log.format import LineFilter
    from console.widgets.log.rows import Rows
    from console.widgets.log.search import LogSearch
    from server_control.logs import LogStore


class LogSurface(Protocol):
    store: LogStore | None
    rows: Rows
    filter: LineFilter
    search: LogSearch
    mark: int | None
    init_next: int
    numbers: bool
    save_name: str

    @property
    def app(self) -> App[Any]: ...

    @property
    def scroll_y(self) -> float: ...

    @property
    def scrollable_content_region(self) -> Region: ...

    @property
    def search_text(self) -> str: ...

    def notify(self, message: str, *, severity: SeverityLevel = ..., timeout: float | None = ...) -> None: ...

    def show_row(self, row: int, key: int) -> None: ...

    def set_filter_text(self, text: str) -> None: ...

    def search_for(self, text: str) -> bool: ...

    def shown_records(self) -> list: ...
