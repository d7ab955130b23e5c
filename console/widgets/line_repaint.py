"""Repaint only the cells that changed: a widget whose content changed is rendered once, its
lines are compared with the ones on screen, and only the span of each changed line from its
first to its last differing cell is marked dirty (Textual repaints a whole widget on
``refresh()``; the terminal then hears of every cell of it, changed or not).

A panel that updates every second (a tok/s figure, a share of time, a line count) thus sends
the few cells of the figure, not its whole box. Where the lines cannot be compared (not laid
out yet, resized, another repaint pending, a wide character) the widget repaints whole.

This reads Textual's render cache of the widget (``_render_cache``, ``_render_content``,
``_dirty_regions``: Textual 8); if they are missing it falls back to ``refresh()``.
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

Cells = list[tuple[str, Style | None] | None]


def _cells(strip: Strip) -> Cells | None:
    """The strip as one (character, style) per cell; None when a character is not one cell
    wide or a segment is a control sequence."""
    out: Cells = []
    for seg in strip:
        if seg.control:
            return None
        out.extend((ch, seg.style) for ch in seg.text)
    return out if len(out) == strip.cell_length else None


def changed_span(old: Strip | None, new: Strip | None, width: int) -> tuple[int, int] | None:
    """The columns [start, end) of ``new`` that differ from ``old``; None when none does.
    Cells are compared column by column (the terminal keeps each column's cell): a line
    whose text got longer or shorter differs from its first shifted cell to the end of the
    longer one, and a column past the end of one line only differs from the other's cell."""
    if old == new:
        return None
    if old is None or new is None:
        return 0, width
    a, b = _cells(old), _cells(new)
    if a is None or b is None:
        return 0, width
    n = max(len(a), len(b))
    a += [None] * (n - len(a))  # past the end of a line: no cell (the widget's padding)
    b += [None] * (n - len(b))
    start = 0
    while start < n and a[start] == b[start]:
        start += 1
    if start == n:
        return None
    end = n
    while end > start and a[end - 1] == b[end - 1]:
        end -= 1
    return start, end


def repaint_changed_cells(widget: Widget) -> bool:
    """Render ``widget`` now and mark dirty only the cells that differ from what it showed;
    False (nothing done) when it must be refreshed whole. Call it where ``refresh()`` would
    be, after the state that ``render()`` reads has changed."""
    cache = getattr(widget, "_render_cache", None)
    render_content = getattr(widget, "_render_content", None)
    size = widget.size
    if (
        not widget.is_mounted
        or cache is None
        or render_content is None
        or not size
        or cache.size != size
        or len(cache.lines) != size.height
        or widget._dirty_regions
    ):
        return False
    old = cache.lines
    render_content()
    new = widget._render_cache.lines
    for y in range(size.height):
        span = changed_span(old[y] if y < len(old) else None, new[y] if y < len(new) else None, size.width)
        if span is not None:
            widget.refresh(Region(span[0], y, span[1] - span[0], 1))
    widget._dirty_regions.clear()  # what was just rendered is the content: no second render
    return True
