"""The fleet table: fixed-width columns drawn line by line, each row's line cached until its
cells change. Textual's DataTable re-renders every visible cell whenever any cell changes;
with 32 members whose tok/s and batch move every second that alone took ~10 % of a core.

    table.show(order, cells_by_name)    # rows in order; cells as console.fleet.rows.cells gives
    table.cursor_row, table.cursor_name, table.move_cursor(row)
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.fleet.rows import COLUMNS

HEADER_STYLE = Style(bold=True, reverse=True)
CURSOR_STYLE = Style(reverse=True)


def _cell(value, width: int) -> Text:
    text = value.copy() if isinstance(value, Text) else Text(str(value))
    text.truncate(width, overflow="ellipsis", pad=True)
    return text


def row_text(cells: dict) -> Text:
    line = Text()
    for c in COLUMNS:
        line.append_text(_cell(cells.get(c.key, ""), c.width))
        line.append(" ")
    return line


class FleetTable(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "move(-1)", show=False),
        Binding("down,j", "move(1)", show=False),
        Binding("g,home", "move(-100000)", show=False),
        Binding("G,end", "move(100000)", show=False),
        Binding("pageup", "move(-10)", show=False),
        Binding("pagedown", "move(10)", show=False),
    ]
    DEFAULT_CSS = "FleetTable { height: 1fr; }"
    cursor_row = reactive(0, always_update=True)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.order: list[str] = []
        self._cells: dict[str, dict] = {}
        self._strips: dict[str, Strip] = {}  # name -> its drawn line (until its cells change)
        self._header = row_text({c.key: c.title for c in COLUMNS})
        self._sorted: tuple[str, bool] | None = None

    def sorted_by(self, key: str, reverse: bool) -> None:
        """The sorted column's title gets an arrow: ▲ ascending, ▼ descending."""
        if self._sorted != (key, reverse):
            self._sorted = (key, reverse)
            arrow = "▼" if reverse else "▲"
            self._header = row_text({c.key: c.title + arrow if c.key == key else c.title for c in COLUMNS})
            self.refresh()

    @property
    def cursor_name(self) -> str | None:
        return self.order[self.cursor_row] if 0 <= self.cursor_row < len(self.order) else None

    def show(self, order: list[str], cells: dict[str, dict]) -> None:
        changed = order != self.order
        for name in order:
            if self._cells.get(name) is None or any(str(cells[name][k]) != str(self._cells[name].get(k)) for k in cells[name]):
                self._cells[name] = cells[name]
                self._strips.pop(name, None)
                changed = True
        self.order = list(order)
        self.virtual_size = Size(self._header.cell_len, len(order) + 1)
        if self.cursor_row >= len(order):
            self.cursor_row = max(0, len(order) - 1)
        if changed:
            self.refresh()

    def move_cursor(self, row: int) -> None:
        self.cursor_row = max(0, min(row, len(self.order) - 1))
        top = self.scroll_offset.y
        visible = max(1, self.size.height - 1)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)
        self.refresh()

    def action_move(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return (
                Strip(self._header.render(self.app.console), self._header.cell_len)
                .apply_style(HEADER_STYLE)
                .crop_extend(self.scroll_offset.x, self.scroll_offset.x + width, HEADER_STYLE)
            )
        index = y - 1 + self.scroll_offset.y
        if index >= len(self.order):
            return Strip.blank(width)
        name = self.order[index]
        strip = self._strips.get(name)
        if strip is None:
            line = row_text(self._cells.get(name) or {"name": name})
            strip = self._strips[name] = Strip(list(line.render(self.app.console)), line.cell_len)
        if index == self.cursor_row and self.has_focus:
            strip = strip.apply_style(CURSOR_STYLE)
        return strip.crop_extend(self.scroll_offset.x, self.scroll_offset.x + width, None)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
