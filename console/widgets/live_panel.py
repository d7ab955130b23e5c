"""Live panel: decode batch sparkline with the threshold N drawn across it, and the
current tok/s, accept length (and, where the patch reports it, the accept length over
speculative steps only: ``spec``), queue and token usage."""
from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.text import Text

from console.widgets.fmt import mode_badge, num
from console.widgets.snapshot_view import SnapshotView
from server_control.snapshot import LiveLoad, Point, SessionSnapshot

BLOCKS = " \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
LABEL_W = 7


@dataclass(frozen=True)
class LiveView:
    """What the live panel shows of a snapshot."""

    live: LiveLoad
    batch: tuple[Point, ...]
    threshold: int | None
    mode: str | None
    spec_accept: float | None = None  # over the speculative steps only (the patch's count)


def batch_chart(values: list[float], n: int | None, width: int, height: int) -> list[Text]:
    """Rows of a bar chart, top row first; N as a dashed line, bars above N in red."""
    width, height = max(1, width), max(1, height)
    values = values[-width:]
    top = max([*values, (n * 1.25 if n else 0), 1.0])
    eighths = [round(v / top * height * 8) for v in values]
    n_row = min(height - 1, int((n / top) * height)) if n else None
    rows = []
    for r in range(height - 1, -1, -1):
        # N's label wins over the scale's when both fall on the top row (short panels).
        label = f"N={n:<3}" if r == n_row else (f"{top:>5.0f} " if r == height - 1 else "")
        t = Text(f"{label:<{LABEL_W}}"[:LABEL_W], "yellow" if r == n_row else "dim", no_wrap=True)
        for i, e in enumerate(eighths):
            fill = max(0, min(8, e - r * 8))
            if fill == 0 and r == n_row:
                t.append("\u254c", "yellow")
            else:
                over = n is not None and n > 0 and values[i] > n
                t.append(BLOCKS[fill], "bright_red" if over else "green")
        if r == n_row and len(eighths) < width:
            t.append("\u254c" * (width - len(eighths)), "yellow")
        rows.append(t)
    return rows


def numbers_line(view: LiveView) -> Text:
    live = view.live
    t = Text(no_wrap=True, overflow="ellipsis")
    label, style = mode_badge(view.mode)
    t.append(label.strip()[:4], style)
    for name, value in (("batch", num(live.batch, "{:.0f}")),
                        ("tok/s", num(live.gen_throughput, "{:.0f}")),
                        ("accept", num(live.accept_len, "{:.2f}")),
                        *((("spec", num(view.spec_accept, "{:.2f}")),) if view.spec_accept is not None else ()),
                        ("queue", num(live.queue, "{:.0f}")),
                        ("kv", num(live.token_usage, "{:.0%}"))):
        t.append(f" {name} ", "dim")
        t.append(value, "bold")
    return t


class LivePanel(SnapshotView):
    DEFAULT_CSS = "LivePanel { height: 6; border-title-color: $text-muted; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "live"

    def pick(self, snap: SessionSnapshot) -> LiveView:
        return LiveView(snap.live, snap.series.batch, snap.spec.threshold, snap.spec.mode,
                        snap.spec.health.accept_len)

    def render(self) -> Group:
        width, height = self.content_size.width, self.content_size.height
        view: LiveView = self.part
        values = [max(0.0, float(v)) for _, v in view.batch]
        chart_h = max(0, height - 1)
        rows = batch_chart(values, view.threshold, width - LABEL_W, chart_h) if chart_h else []
        return Group(*rows, numbers_line(view))
