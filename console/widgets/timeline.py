"""Mode timeline: each switch (time, mode, batch, threshold; a forced one marked
'(forced)') and, per mode, the share of time and the tok/s measured in it, in the current
run (after a restart the earlier runs' switches stay listed below the restart row, and
their number is said beside the split)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.console import Group
from rich.table import Table
from rich.text import Text

from console.widgets.fmt import clock, num
from console.widgets.run_marks import local_clock, mark_index, restart_label
from console.widgets.snapshot_view import SnapshotView
from server_control.model.snapshot import ModeShare, SessionSnapshot, Switch, Timeline

COMPACT_BELOW = 44  # content width under which the panel uses short labels (80x24)
SHORT = {"speculative": "spec", "target_only": "target"}


def per_mode_line(timeline: Timeline, compact: bool = False) -> Text:
    """Share of time and tok/s per mode; compact: one mode per line, short labels."""
    t = Text(no_wrap=True, overflow="ellipsis")
    for i, (mode, style) in enumerate((("speculative", "bright_green"), ("target_only", "bright_blue"))):
        d = timeline.per_mode.get(mode) or ModeShare()
        if i:
            t.append("\n" if compact else "  ")
        t.append(f"{SHORT[mode] if compact else mode.replace('_', '-')} ", style)
        t.append(num(d.share, "{:.0%}"), "bold")
        t.append(" " if compact else " time, ", "dim")
        t.append(num(d.tok_s, "{:.0f}"), "bold")
        t.append(" tok/s", "dim")
    if timeline.earlier and not compact:  # the split is this run's; the earlier runs' switches are below the mark
        n = timeline.earlier
        t.append(f"  (this run; {n} switch{'es' if n != 1 else ''} before)", "dim")
    return t


@dataclass(frozen=True)
class Row:
    """One switch as shown: every TP rank logs it, so it appears once with their ranks."""

    switch: Switch
    ranks: tuple[str | None, ...]

    @property
    def rank(self) -> str:
        return ",".join(str(r) for r in self.ranks if r)


def merge_ranks(switches: tuple[Switch, ...] | list[Switch]) -> list[Row]:
    """Every TP rank logs the same switch: show it once, with the ranks that logged it."""
    out: list[Row] = []
    for sw in switches:
        prev = out[-1].switch if out else None
        same = (
            prev is not None
            and (prev.mode, prev.batch, prev.threshold) == (sw.mode, sw.batch, sw.threshold)
            and clock(prev.ts) == clock(sw.ts)
            and sw.rank not in out[-1].ranks
        )
        if same:
            out[-1] = replace(out[-1], ranks=(*out[-1].ranks, sw.rank))
        else:
            out.append(Row(sw, (sw.rank,)))
    return out


def switches_table(
    timeline: Timeline, rows: int, compact: bool = False, restart: str | None = None, started_at: str | None = None
) -> Table:
    """Newest switch first; compact (narrow panel): short mode names, no rank column. After a
    restart, a row where the current run began (console/widgets/run_marks.py)."""
    table = Table(
        box=None,
        padding=(0, 1, 0, 0) if compact else (0, 1),
        pad_edge=not compact,
        expand=True,
        show_edge=False,
        header_style="dim",
    )
    cols = ("time", "to", "bs", "N") if compact else ("time", "to", "batch", "N", "rank")
    for col in cols:
        table.add_column(col, no_wrap=True)
    switches: list[Row | None] = list(merge_ranks(timeline.switches))
    if restart is not None:
        switches.insert(mark_index([r.switch.ts for r in switches if r is not None], started_at), None)
    for row in switches[-rows:][::-1] if rows > 0 else []:
        if row is None:
            word = (restart or "").replace("restart", "rst") if compact else restart or ""
            mark: list[Text | str] = [clock(local_clock(started_at)), Text(word, "bold yellow"), "", "", ""]
            table.add_row(*mark[: len(cols)])
            continue
        sw = row.switch
        style = "bright_blue" if sw.mode == "target_only" else "bright_green"
        name = SHORT.get(sw.mode, sw.mode) if compact else sw.mode.replace("_", "-")
        if sw.forced:  # made by F (a forced mode), not by the threshold rule
            name = f"{name} F" if compact else f"{name} (forced)"
        cells: list[Text | str] = [
            clock(sw.ts),
            Text(name, style),
            "-" if sw.batch is None else str(sw.batch),
            "-" if sw.threshold is None else str(sw.threshold),
            row.rank,
        ]
        table.add_row(*cells[: len(cols)])
    if not switches:
        table.add_row("-", Text("no switch yet", "dim"), *[""] * (len(cols) - 2))
    return table


class SwitchTimeline(SnapshotView):
    DEFAULT_CSS = "SwitchTimeline { height: 12; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "mode switches"

    def pick(self, snap: SessionSnapshot) -> tuple[Timeline, str | None, str | None]:
        return snap.timeline, restart_label(snap.run), snap.run.started_at  # not the whole run: its uptime ticks

    def render(self) -> Group:
        compact = self.content_size.width < COMPACT_BELOW
        rows = max(0, self.content_size.height - (3 if compact else 2))
        timeline, restart, started_at = self.part
        return Group(per_mode_line(timeline, compact), switches_table(timeline, rows, compact, restart, started_at))
