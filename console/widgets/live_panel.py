"""Live panel: decode batch chart with the threshold N drawn across it and a time axis,
and the current tok/s, accept length (and, where the patch reports it, the accept length
over speculative steps only: ``spec``), queue and token usage.

Each bar is drawn in the mode the server was in at that poll (``series.mode``), by colour
and by glyph: speculative bars solid, target-only bars hatched, so the modes stay apart in
16 colours and with NO_COLOR. While the server does not answer, the numbers are those of
the last poll it answered, dimmed, with their age; the bars keep their colours.

Over the profile's history (``history``: a callable giving the session's ``history()``) the
chart starts with what an earlier console recorded (the subtitle says how old it is), marks
restarts (``R``) and outages (``×``) on the time axis, zooms out (``zoom_out``: one bar a
poll, 10 min, 1 h, 6 h; console/widgets/history_chart.py) and shows batch, tok/s or the
accept length (``cycle_metric``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rich.console import Group
from rich.text import Text

from console.widgets.fmt import mode_badge, num
from console.widgets.history_chart import (
    METRIC_WORDS,
    METRICS,
    ZOOMS,
    draw_axis,
    marks_between,
    span_words,
    value_of,
    zoom_axis,
    zoom_columns,
)
from console.widgets.snapshot_view import SnapshotView
from server_control.model.load import Load
from server_control.model.snapshot import Point, SessionSnapshot
from server_control.protocol.decision import THRESHOLD_COUNTS_WORDS
from server_control.state.history import HistPoint, Recorded

BLOCKS = " \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
HATCH = "\u2592"  # the full cells of a target-only bar
LABEL_W = 7
AXIS_MIN_H = 4  # content rows needed before a row goes to the time axis (the advice line leaves 4 at 120x40)
MODE_STYLE = {0: "green", 1: "bright_blue"}  # series.mode: 0 speculative, 1 target-only


@dataclass(frozen=True)
class LiveView:
    """What the live panel draws of a snapshot, and nothing else: two snapshots that draw
    the same panel give equal views, so the panel repaints (and the terminal hears of it)
    only when something on it changed. An idle server's poll adds a point of batch 0 and
    moves every time stamp, not the picture."""

    live: Load  # the numbers line (its time stamp left out)
    values: tuple[float, ...]  # batch per poll, oldest first (as many as fit, once laid out)
    threshold: int | None
    mode: str | None
    modes: tuple[int | None, ...] = ()  # the mode of each poll (0 speculative, 1 target-only)
    stale_s: int | None = None  # the server does not answer: age of the last sample (s)
    spec_accept: float | None = None  # over the speculative steps only (the patch's count)
    axis: Text = field(default_factory=Text)  # the time axis as drawn at ``width``
    width: int = 0
    ts: tuple[float, ...] = field(default=(), compare=False)  # poll times, for another width
    marks: tuple[str, ...] = ()  # per bar: "" / "R" (a restart) / "×" (an outage) before it
    zoom: int = 0  # index in ZOOMS (0: one bar a poll)
    metric: str = "batch"
    recorded_age_s: int | None = None  # the chart starts with an earlier record ending this long before
    polled: bool = False  # ... before this console's first poll (else: before now)


def mode_at(modes: tuple[Point, ...] | list[Point], ts: list[float]) -> list[int | None]:
    """The mode (0/1) of the poll at or just before each time in ``ts`` (sorted)."""
    out: list[int | None] = []
    j, cur = 0, None
    for t in ts:
        while j < len(modes) and modes[j][0] <= t:
            cur = int(modes[j][1])
            j += 1
        out.append(cur)
    return out


def batch_chart(
    values: list[float], n: int | None, width: int, height: int, modes: list[int | None] | None = None, scale: str = "{:>5.0f} "
) -> list[Text]:
    """Rows of a bar chart, top row first; N as a dashed line. A bar's mode (``modes``: 1
    target-only, 0 speculative) gives its colour and glyph; without it a bar above N counts
    as target-only."""
    width, height = max(1, width), max(1, height)
    values = values[-width:]
    modes = (modes or [])[-width:]
    top = max([*values, (n * 1.25 if n else 0), 1.0])
    eighths = [round(v / top * height * 8) for v in values]
    n_row = min(height - 1, int((n / top) * height)) if n else None
    kinds = [
        m if i < len(modes) and (m := modes[i]) is not None else int(n is not None and n > 0 and v > n)
        for i, v in enumerate(values)
    ]
    rows = []
    for r in range(height - 1, -1, -1):
        # N's label wins over the scale's when both fall on the top row (short panels).
        label = f"N={n:<3}" if r == n_row else (scale.format(top) if r == height - 1 else "")
        t = Text(f"{label:<{LABEL_W}}"[:LABEL_W], "yellow" if r == n_row else "dim", no_wrap=True)
        for e, kind in zip(eighths, kinds):
            fill = max(0, min(8, e - r * 8))
            if fill == 0 and r == n_row:
                t.append("\u254c", "yellow")
            else:
                glyph = HATCH if kind == 1 and fill == 8 else BLOCKS[fill]
                t.append(glyph, MODE_STYLE[kind])
        if r == n_row and len(eighths) < width:
            t.append("\u254c" * (width - len(eighths)), "yellow")
        rows.append(t)
    return rows


def time_axis(ts: list[float], width: int, marks: tuple[str, ...] | list[str] = ()) -> Text:
    """Under the bars: the age of the poll under a tick every ~15 columns, 'now' at the
    right; a restart or outage mark (``marks``, per bar) over them."""
    t = Text(" " * LABEL_W, "dim", no_wrap=True)
    ts = ts[-width:]
    if not ts:
        return t
    if any(marks):
        last = ts[-1]
        ticks = [(i, "now" if last - ts[i] < 0.5 else f"-{last - ts[i]:.0f}s") for i in range(len(ts) - 1, -1, -15)]
        return draw_axis(ticks, list(marks)[-width:], len(ts), LABEL_W)
    cells = [" "] * len(ts)
    last = ts[-1]
    i = len(ts) - 1
    labels: list[tuple[int, str]] = []
    while i >= 0:
        age = last - ts[i]
        labels.append((i, "now" if age < 0.5 else f"-{age:.0f}s"))
        i -= 15
    for i, word in labels:
        start = max(0, i - len(word) + 1)
        if all(c == " " for c in cells[start : i + 1]) and (start == 0 or cells[start - 1] == " "):
            cells[start : i + 1] = list(word)[: i + 1 - start]
    t.append("".join(cells), "dim")
    return t


def numbers_line(view: LiveView) -> Text:
    live = view.live
    t = Text(no_wrap=True, overflow="ellipsis")
    label, style = mode_badge(view.mode)
    stale = view.stale_s is not None
    if stale:  # first, so a narrow panel cuts the numbers, not the age
        t.append(f"last sample {view.stale_s} s ago: ", "bold yellow")
    t.append(label.strip()[:4], "dim" if stale else style)
    for name, value in (
        ("batch", num(live.batch, "{:.0f}")),
        ("tok/s", num(live.gen_throughput, "{:.0f}")),
        ("acc", num(live.accept_len, "{:.2f}")),
        *((("spec", num(view.spec_accept, "{:.2f}")),) if view.spec_accept is not None else ()),
        ("queue", num(live.queue, "{:.0f}")),
        ("kv", num(live.token_usage, "{:.0%}")),
    ):
        t.append(f" {name} ", "dim")
        t.append(value, "dim" if stale else "bold")
    return t


MAX_BARS = 600  # bars kept before the panel is laid out (as many as the session's series)
SERIES_OF = {"batch": "batch", "tok_s": "gen_throughput", "accept": "accept_len"}


def age_words(seconds: float) -> str:
    return span_words(max(0.0, seconds)) if seconds < 2 * 3600 else f"{seconds / 3600:.1f}h"


def record_age(hist: list[HistPoint], until: float | None, shown_from: float | None) -> tuple[int | None, bool]:
    """When the chart (from ``shown_from`` on) shows what an earlier session recorded (up to
    ``until``): how long before this session's first point that record ends (True), or,
    before this session recorded anything, how long ago (False)."""
    if until is None or shown_from is None or shown_from > until:
        return None, False
    after = next((p.ts for p in hist if p.ts > until), None)
    return int((after if after is not None else time.time()) - until), after is not None


class LivePanel(SnapshotView):
    DEFAULT_CSS = "LivePanel { height: 6; border-title-color: $text-muted; }"

    def __init__(self, history: Callable[[], Recorded] | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.history = history or Recorded
        self.zoom = 0  # index in ZOOMS
        self.metric = "batch"
        self.border_title = "live"
        # what the chart's batch and its N line count, where an operator hovers to ask
        self.tooltip = f"batch and N count {THRESHOLD_COUNTS_WORDS}; target-only while batch > N"

    def zoom_out(self, step: int = 1) -> str:
        """Zoom out (``step`` -1: in), clamped; says the view now shown."""
        self.zoom = max(0, min(len(ZOOMS) - 1, self.zoom + step))
        return self._retake()

    def cycle_metric(self) -> str:
        self.metric = METRICS[(METRICS.index(self.metric) + 1) % len(METRICS)]
        return self._retake()

    def _retake(self) -> str:
        self.take(self.pick(self.snapshot))
        return self.title_of(self.part)

    @staticmethod
    def title_of(view: LiveView) -> str:
        window = ZOOMS[view.zoom]
        words = [
            "live" if window is None else f"last {span_words(window)}",
            *((METRIC_WORDS[view.metric],) if view.metric != "batch" else ()),
        ]
        return " \u00b7 ".join(words)

    def on_part(self, part: LiveView) -> None:
        # set only when they change: setting a border title repaints the whole panel
        title = self.title_of(part)
        age = part.recorded_age_s
        when = "before this console" if part.polled else "ago"
        subtitle = f"recorded until {age_words(age)} {when}" if age is not None else None
        if title != self.border_title:
            self.border_title = title
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle

    def pick(self, snap: SessionSnapshot) -> LiveView:
        stale = None
        if not snap.server.reachable and snap.live.ts:
            stale = max(0, int(time.time() - snap.live.ts))
        width = max(0, self.content_size.width - LABEL_W)
        rec = self.history()
        hist = list(rec.points)
        base = LiveView(
            replace(snap.live, ts=None),
            (),
            snap.spec.threshold if self.metric == "batch" else None,
            snap.spec.mode,
            stale_s=stale,
            spec_accept=snap.spec.health.accept_len,
            width=width,
            zoom=self.zoom,
            metric=self.metric,
        )
        window = ZOOMS[self.zoom]
        if window is not None:
            now = max(time.time(), hist[-1].ts if hist else 0.0)
            cols = zoom_columns(hist, self.metric, window, width or 1, now)
            axis = draw_axis(zoom_axis(window, width), list(cols.marks), width, LABEL_W) if width else Text()
            age, polled = record_age(hist, rec.until, now - window)
            view = replace(base, values=cols.values, modes=cols.modes, marks=cols.marks, axis=axis, ts=cols.edges)
            return replace(view, recorded_age_s=age, polled=polled)
        series = getattr(snap.series, SERIES_OF[self.metric])
        pts = series[-width:] if width else series
        first = pts[0][0] if pts else None
        ts = [float(t) for t, _ in pts]
        values = [max(0.0, float(v)) for _, v in pts]
        modes = mode_at(snap.series.mode, ts) if snap.series.mode else [None] * len(ts)
        room = (width or MAX_BARS) - len(pts)
        limit = first if first is not None else float("inf")
        # Points that answered before this session's first bar: an earlier console's record.
        before = [p for p in hist if p.ts < limit and p.up and value_of(p, self.metric) is not None][-room:] if room > 0 else []
        if before:  # the chart begins with it
            ts = [p.ts for p in before] + ts
            values = [max(0.0, value_of(p, self.metric) or 0.0) for p in before] + values
            modes = [p.mode for p in before] + modes
        marks = tuple(marks_between(hist, ts)) if hist else ()
        age, polled = record_age(hist, rec.until, ts[0] if ts else None)
        return replace(
            base,
            values=tuple(values),
            modes=tuple(modes) if any(m is not None for m in modes) else (),
            axis=time_axis(ts, width, marks) if width else Text(),
            ts=tuple(ts),
            marks=marks,
            recorded_age_s=age,
            polled=polled,
        )

    def render(self) -> Group:
        width, height = self.content_size.width, self.content_size.height
        view: LiveView = self.part
        axis = height >= AXIS_MIN_H
        chart_h = max(0, height - 1 - int(axis))
        values = list(view.values)
        scale = "{:>5.1f} " if view.metric == "accept" else "{:>5.0f} "
        modes = list(view.modes) or None
        rows = batch_chart(values, view.threshold, width - LABEL_W, chart_h, modes, scale) if chart_h else []
        if axis:
            if view.width == width - LABEL_W:
                rows.append(view.axis)
            elif view.zoom:
                rows.append(Text(" " * LABEL_W))  # laid out again: the next pick draws it
            else:
                rows.append(time_axis(list(view.ts), width - LABEL_W, view.marks))
        return Group(*rows, numbers_line(view))
