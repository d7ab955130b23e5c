"""Mode timeline: each switch (time, mode, batch, threshold) and, per mode, the share of
time and the tok/s measured in it."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from console.widgets.fmt import clock, num, section


COMPACT_BELOW = 44  # content width under which the panel uses short labels (80x24)
SHORT = {"speculative": "spec", "target_only": "target"}


def per_mode_line(snap: dict, compact: bool = False) -> Text:
    """Share of time and tok/s per mode; compact: one mode per line, short labels."""
    per_mode = section(snap, "per_mode")
    t = Text(no_wrap=True, overflow="ellipsis")
    for i, (mode, style) in enumerate((("speculative", "bright_green"), ("target_only", "bright_blue"))):
        d = per_mode.get(mode) if isinstance(per_mode.get(mode), dict) else {}
        if i:
            t.append("\n" if compact else "  ")
        t.append(f"{SHORT[mode] if compact else mode.replace('_', '-')} ", style)
        t.append(num(d.get("share"), "{:.0%}"), "bold")
        t.append(" " if compact else " time, ", "dim")
        t.append(num(d.get("tok_s"), "{:.0f}"), "bold")
        t.append(" tok/s", "dim")
    return t


def merge_ranks(switches: list[dict]) -> list[dict]:
    """Every TP rank logs the same switch: show it once, with the ranks that logged it."""
    out: list[dict] = []
    for sw in switches:
        prev = out[-1] if out else None
        same = prev is not None and all(prev.get(k) == sw.get(k) for k in ("mode", "batch", "threshold")) \
            and clock(prev.get("ts")) == clock(sw.get("ts")) and sw.get("rank") not in prev["_ranks"]
        if same:
            prev["_ranks"].append(sw.get("rank"))
            prev["rank"] = ",".join(str(r) for r in prev["_ranks"] if r)
        else:
            out.append({**sw, "_ranks": [sw.get("rank")]})
    return out


def switches_table(snap: dict, rows: int, compact: bool = False) -> Table:
    """Newest switch first; compact (narrow panel): short mode names, no rank column."""
    table = Table(box=None, padding=(0, 1, 0, 0) if compact else (0, 1), pad_edge=not compact,
                  expand=True, show_edge=False, header_style="dim")
    cols = ("time", "to", "bs", "N") if compact else ("time", "to", "batch", "N", "rank")
    for col in cols:
        table.add_column(col, no_wrap=True)
    switches = merge_ranks([s for s in (snap or {}).get("switches") or [] if isinstance(s, dict)])
    for sw in switches[-rows:][::-1] if rows > 0 else []:
        mode = sw.get("mode")
        style = "bright_blue" if mode == "target_only" else "bright_green"
        name = SHORT.get(mode, str(mode or "?")) if compact else str(mode or "?").replace("_", "-")
        cells = [clock(sw.get("ts")), Text(name, style), str(sw.get("batch", "-")),
                 str(sw.get("threshold", "-")), str(sw.get("rank") or "")]
        table.add_row(*cells[:len(cols)])
    if not switches:
        table.add_row("-", Text("no switch yet", "dim"), *[""] * (len(cols) - 2))
    return table


class ModeTimeline(Widget):
    DEFAULT_CSS = "ModeTimeline { height: 12; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._snap: dict = {}
        self.border_title = "mode switches"

    def show(self, snap: dict) -> None:
        key = repr(((snap or {}).get("switches"), section(snap, "per_mode")))
        self._snap = snap
        if key != getattr(self, "_key", None):
            self._key = key
            self.refresh()

    def render(self):
        compact = self.content_size.width < COMPACT_BELOW
        rows = max(0, self.content_size.height - (3 if compact else 2))
        return Group(per_mode_line(self._snap, compact), switches_table(self._snap, rows, compact))
