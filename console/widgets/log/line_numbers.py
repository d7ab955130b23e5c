"""Line numbers, go-to-line and yank in the log view.

A record's ``line`` is its first line's number in the log file (what verification cites:
"log line 118"); the i-th line of a multi-line record (a traceback) is ``line + i``. The
console's own lines (line 0) have no number. `#` shows or hides the numbers; `:` asks for a
number, marks that line (it becomes the current line) and scrolls to it; `y` copies the
current line (the marked one, else the current search match) to the clipboard with
Textual's ``copy_to_clipboard`` (OSC 52: works over ssh and in tmux with set-clipboard on),
or, with no current line, the lines on the screen. Where the log holds one number twice
(a restart began a new file), the newest run's line is the one meant. `I` goes to each
rank's init line in turn (or says that none was logged, and what that means).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text

from console.widgets.log.format import record_lines
from console.widgets.log.rows import SUB_BITS
from server_control.control.init_lines import NOT_IN_SERVER
from server_control.logs.record import SPEC_INIT

if TYPE_CHECKING:
    from console.widgets.log.rows import Rows
    from console.widgets.log.surface import LogSurface
    from server_control.logs import LogStore, Record

MIN_DIGITS = 5
NUMBER_STYLE = Style(dim=True)
MARKER = "\u25b6"  # the current line's marker in the gutter (readable without colour)


def line_number(rec: Record, sub: int) -> int | None:
    """The file line number of line ``sub`` of ``rec`` (None for the console's own lines)."""
    return rec.line + sub if rec.line else None


def gutter_width(store: LogStore | None) -> int:
    """Digits of the largest line number in memory (at least MIN_DIGITS), plus the marker column."""
    last = store.get(store.last_seq) if store is not None else None
    return max(MIN_DIGITS, len(str(last.line))) + 2 if last is not None else MIN_DIGITS + 2


def gutter(rec: Record, sub: int, start: int, width: int, current: bool) -> Text:
    """The row's gutter: its line number (only on the first row of a wrapped line), then the
    current line's marker or a space."""
    num = line_number(rec, sub)
    label = f"{num:>{width - 2}}" if num is not None and start == 0 else " " * (width - 2)
    text = Text(label, NUMBER_STYLE, end="")
    text.append(MARKER if current else " ", Style(bold=True) if current else None)
    text.append(" ")
    return text


class GoTo:
    """Where the operator's line number is in the view: a row, and why it is not shown when not."""

    def __init__(self, row: int | None, key: int | None, why: str) -> None:
        self.row, self.key, self.why = row, key, why


def find_line(rows: Rows, store: LogStore, number: int) -> GoTo:
    """The row of file line ``number`` (the newest run's when the log holds it twice), else the
    nearest shown line before it, with the reason it is not shown itself."""
    best_row = None
    for row in range(len(rows) - 1, -1, -1):
        if rows.start[row]:
            continue
        rec = store.get(rows.seq[row])
        if rec is None or not rec.line:
            continue
        num = rec.line + rows.sub[row]
        if num == number:
            return GoTo(row, rows.key(row), "")
        if num < number and best_row is None:
            best_row = row
            break
    held = [r for r in store.records() if r.line and r.line <= number < r.line + len(record_lines(r))]
    if not held:
        oldest = next((r.line for r in store.records() if r.line), None)
        why = (
            f"log line {number} is not in memory (the oldest kept is line {oldest})"
            if oldest is not None and number < oldest
            else f"the log has no line {number} yet"
        )
    else:
        why = f"log line {number} is hidden (the filter, polls kept back, or folded TP copies; esc, a, t)"
    if best_row is None:
        return GoTo(None, None, why)
    return GoTo(best_row, rows.key(best_row), why + "; the nearest line before it is marked")


def key_text(store: LogStore, key: int) -> str | None:
    """The whole line (unwrapped, as shown) that ``key`` names."""
    rec = store.get(key >> SUB_BITS)
    if rec is None:
        return None
    lines = record_lines(rec)
    sub = key & ((1 << SUB_BITS) - 1)
    return lines[sub] if sub < len(lines) else None


def screen_text(rows: Rows, store: LogStore, top: int, height: int) -> str:
    """The lines on the screen (rows ``top`` .. ``top + height``), each whole once."""
    out, seen = [], set()
    for row in range(top, min(len(rows), top + height)):
        key = rows.key(row)
        if key in seen:
            continue
        seen.add(key)
        text = key_text(store, key)
        if text is not None:
            out.append(text)
    return "\n".join(out)


def yank(view: LogSurface) -> str | None:
    """`y`: copy the current line (the marked one, else the current search match) or, with
    none, the lines on the screen; says what it copied. Returns the text copied."""
    store = view.store
    if store is None or not len(view.rows):
        view.notify("nothing to copy", severity="warning")
        return None
    key = view.mark if view.mark is not None else view.search.current
    if key is not None and (text := key_text(store, key)) is not None:
        what = "the current line"
    else:
        height = view.scrollable_content_region.height or 1
        text = screen_text(view.rows, store, int(view.scroll_y), height)
        what = f"the {text.count(chr(10)) + 1} lines on the screen"
    view.app.copy_to_clipboard(text)
    view.notify(f"copied {what} ({len(text)} characters)", timeout=3)
    return text


def goto_init(view: LogSurface) -> Record | None:
    """`I`: the next rank's init line (``Dynamic speculation disable enabled: threshold=N``),
    marked as `:` marks a line, each press the next one (TP0, TP1, ... then round again); with
    none in the log, says what that means (the switch is not in this server) and where to
    look. Returns the record gone to."""
    store = view.store
    inits = store.tail_of_kind(SPEC_INIT, len(store)) if store is not None else []
    if store is None or not inits:
        view.notify(f"{NOT_IN_SERVER}; `specconsole verify --explain` says where to look", severity="warning", timeout=10)
        return None
    n = view.init_next % len(inits)
    view.init_next = n + 1
    rec = inits[n]
    view.numbers = True
    where = find_line(view.rows, store, rec.line)
    if where.row is not None and where.key is not None:
        view.show_row(where.row, where.key)
    view.notify(f"init line {n + 1} of {len(inits)}: {rec.rank or 'main'} log line {rec.line}", timeout=5)
    if where.why:
        view.notify(where.why, severity="warning", timeout=6)
    return rec
