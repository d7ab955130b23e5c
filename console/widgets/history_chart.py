"""The live chart's columns over the profile's history (server_control/state/history.py):
what a zoomed-out view draws (one column a time slice: the mean of the metric, the mode
most of it was in), and the marks under the bars: ``R`` where a new run began (a restart),
``×`` where the server did not answer (an outage). Pure functions of the points, so the
live panel (console/widgets/live_panel.py) stays a painter."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text

from server_control.state.history import HistPoint

ZOOMS: tuple[float | None, ...] = (None, 600.0, 3600.0, 6 * 3600.0)  # None: one bar a poll
METRICS = ("batch", "tok_s", "accept")
METRIC_WORDS = {"batch": "batch", "tok_s": "tok/s", "accept": "accept len"}
RESTART, OUTAGE = "R", "\u00d7"
MARK_STYLE = {RESTART: "bold magenta", OUTAGE: "bold red"}


def span_words(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h" if seconds % 3600 == 0 else f"{seconds / 3600:.1f}h"


def value_of(p: HistPoint, metric: str) -> float | None:
    return p.batch if metric == "batch" else p.tok_s if metric == "tok_s" else p.accept


@dataclass(frozen=True)
class Columns:
    values: tuple[float, ...]  # the metric per column (0 where nothing was recorded)
    modes: tuple[int | None, ...]  # the mode most of the column was in
    marks: tuple[str, ...]  # "" / RESTART / OUTAGE per column
    edges: tuple[float, ...]  # each column's end time


def marks_between(points: list[HistPoint], edges: list[float]) -> list[str]:
    """Per column i, the slice (edges[i-1], edges[i]] (the first: everything up to edges[0]
    within one column's width): OUTAGE when a point in it did not answer, RESTART when its
    points' run differs from the run before it (an outage wins: it says more); an outage
    after the last column that lasts to the newest point marks the last."""
    out = [""] * len(edges)
    if not points or not edges:
        return out
    first = edges[0] - (edges[1] - edges[0] if len(edges) > 1 else 1.0)
    j = 0
    run: str | None = None
    while j < len(points) and points[j].ts <= first:
        run = points[j].run
        j += 1
    for i, end in enumerate(edges):
        while j < len(points) and points[j].ts <= end:
            p = points[j]
            if not p.up:
                out[i] = OUTAGE
            elif run is not None and p.run != run and out[i] != OUTAGE:
                out[i] = RESTART
            run = p.run
            j += 1
    if j < len(points) and not points[-1].up:  # after the last bar, and still: no answer
        out[-1] = OUTAGE
    return out


def zoom_columns(points: list[HistPoint], metric: str, window: float, width: int, now: float) -> Columns:
    """``width`` columns over the last ``window`` seconds up to ``now``."""
    width = max(1, width)
    span = window / width
    start = now - window
    sums = [0.0] * width
    counts = [0] * width
    mode_votes = [[0, 0] for _ in range(width)]
    for p in points:
        if p.ts + p.step < start or p.ts > now:
            continue
        first = max(0, int((p.ts - start) // span))
        last = min(width - 1, max(first, int((p.ts + p.step - 1e-9 - start) // span))) if p.step else first
        v = value_of(p, metric)
        for c in range(first, last + 1):
            if v is not None:
                sums[c] += v
                counts[c] += 1
            if p.mode is not None:
                mode_votes[c][p.mode] += 1
    values = tuple(sums[c] / counts[c] if counts[c] else 0.0 for c in range(width))
    modes = tuple(None if not sum(v) else int(v[1] >= v[0]) for v in mode_votes)
    edges = [start + (c + 1) * span for c in range(width)]
    return Columns(values, modes, tuple(marks_between(points, edges)), tuple(edges))


def zoom_axis(window: float, width: int) -> list[tuple[int, str]]:
    """(column, label) of the ticks every ~15 columns, 'now' at the right."""
    span = window / max(1, width)
    out = []
    for i in range(width - 1, -1, -15):
        age = (width - 1 - i) * span
        out.append((i, "now" if age < 0.5 else f"-{span_words(math.ceil(age))}"))
    return out


def draw_axis(labels: list[tuple[int, str]], marks: list[str], width: int, indent: int) -> Text:
    """The axis row: the tick labels where they fit, the marks over them (marks win)."""
    cells = [" "] * width
    for i, word in labels:
        start = max(0, i - len(word) + 1)
        if i < width and all(c == " " for c in cells[start : i + 1]) and (start == 0 or cells[start - 1] == " "):
            cells[start : i + 1] = list(word)[: i + 1 - start]
    t = Text(" " * indent, "dim", no_wrap=True)
    for i, c in enumerate(cells):
        mark = marks[i] if i < len(marks) else ""
        t.append(mark or c, MARK_STYLE[mark] if mark else "dim")
    return t
