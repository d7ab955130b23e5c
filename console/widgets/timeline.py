"""Mode timeline: each switch (time, mode, batch, threshold) and, per mode, the share of
time and the tok/s measured in it."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from console.widgets.fmt import clock, num, section


def per_mode_line(snap: dict) -> Text:
    per_mode = section(snap, "per_mode")
    t = Text(no_wrap=True, overflow="ellipsis")
    for mode, style in (("speculative", "bright_green"), ("target_only", "bright_blue")):
        d = per_mode.get(mode) if isinstance(per_mode.get(mode), dict) else {}
        t.append(f"{mode.replace('_', '-')} ", style)
        t.append(num(d.get("share"), "{:.0%}"), "bold")
        t.append(" of time, ", "dim")
        t.append(num(d.get("tok_s"), "{:.0f}"), "bold")
        t.append(" tok/s  ", "dim")
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


def switches_table(snap: dict, rows: int) -> Table:
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="dim")
    for col in ("time", "to", "batch", "N", "rank"):
        table.add_column(col, no_wrap=True)
    switches = merge_ranks([s for s in (snap or {}).get("switches") or [] if isinstance(s, dict)])
    for sw in switches[-rows:][::-1] if rows > 0 else []:
        mode = sw.get("mode")
        style = "bright_blue" if mode == "target_only" else "bright_green"
        table.add_row(clock(sw.get("ts")), Text(str(mode or "?").replace("_", "-"), style),
                      str(sw.get("batch", "-")), str(sw.get("threshold", "-")), str(sw.get("rank") or ""))
    if not switches:
        table.add_row("-", Text("no switch yet", "dim"), "", "", "")
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
        rows = max(0, self.content_size.height - 2)
        return Group(per_mode_line(self._snap), switches_table(self._snap, rows))
