"""GPU table: utilisation (with NVML GPM's SM / tensor / DRAM-bandwidth activity where the
GPUs have it), memory, power, temperature and the run's PIDs per GPU; without
NVML one line (no border, no header) with the reason. Below it, per server rank that
reports them: the steps=0 state's memory (GiB) and its graph/all decode steps per mode."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from console.widgets.fmt import num
from console.widgets.snapshot_view import SnapshotView
from server_control.model.gpu_status import GpuStatus
from server_control.model.rank_resources import RankResources
from server_control.model.snapshot import SessionSnapshot


def gpu_table(gpus: GpuStatus) -> Table:
    """One row per GPU; where any GPU reports NVML GPM (Hopper and later), its SM,
    tensor-core and DRAM-bandwidth activity beside utilisation (which reads ~100 % while
    any kernel runs)."""
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="dim")
    gpm = any(d.has_gpm for d in gpus.devices)
    for col in ("gpu", "name", "util", *(("SM", "tensor", "DRAM bw") if gpm else ()), "memory", "power", "temp", "pids"):
        table.add_column(col, no_wrap=True)
    for d in gpus.devices:
        util_style = "bold red" if d.util is not None and d.util >= 90 else ""
        mem = f"{num(d.mem_used_mb, '{:.0f}')}/{num(d.mem_total_mb, '{:.0f}')} MB"
        pids = ",".join(str(p) for p in d.pids) or "-"
        table.add_row(
            str(d.index),
            d.name,
            Text(num(d.util, "{:.0f}%"), util_style),
            *((num(v, "{:.0f}%") for v in (d.sm_active_pct, d.tensor_active_pct, d.dram_bw_pct)) if gpm else ()),
            mem,
            num(d.power_w, "{:.0f} W"),
            num(d.temp_c, "{:.0f}\u00b0C"),
            pids,
        )
    return table


def rank_table(ranks: tuple[RankResources, ...]) -> Table:
    """Per rank: the steps=0 state's memory and graph/all decode steps per mode."""
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="dim")
    modes = sorted({mode for r in ranks for mode in r.forwards})
    for col in ("rank", "steps=0 GiB", "estimate", "reserved", *(f"{mode} target/draft-ext graph" for mode in modes)):
        table.add_column(col, no_wrap=True)
    for r in ranks:
        if r.failed:
            table.add_row(r.rank, Text(r.failed, "bold red"))
            continue
        m = r.memory
        table.add_row(
            r.rank,
            num(m.get("used_gib"), "{:.3f}"),
            num(m.get("estimate_gib"), "{:.3f}"),
            num(m.get("reserved_gib"), "{:.3f}"),
            *(f"{r.graph_share(mode, 'target')} {r.graph_share(mode, 'draft_extend')}" for mode in modes),
        )
    return table


class GpuTable(SnapshotView):
    DEFAULT_CSS = "GpuTable { height: auto; max-height: 10; }"
    LAYOUT = True  # a row per GPU: the height follows

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "GPUs"

    def pick(self, snap: SessionSnapshot) -> tuple[GpuStatus, tuple[RankResources, ...]]:
        return snap.gpus, snap.spec.health.ranks

    def on_part(self, part: Any) -> None:
        self.set_class(part is None or (not_available(part[0]) and not part[1]), "-na")
        rows = len(part[1]) if part is not None else 0
        if rows != getattr(self, "_rank_rows", 0):  # a row per rank appears or goes: the height changes
            self._rank_rows = rows
            self.refresh(layout=True)

    def render(self) -> Table | Text | Group:
        gpus, ranks = self.part if self.part is not None else (None, ())
        if gpus is None or not_available(gpus):
            reason = (gpus.reason if gpus is not None else None) or (
                "no GPU reported" if gpus is not None and gpus.available else "NVML unavailable"
            )
            top: Table | Text = Text.assemble(
                ("GPUs ", "dim"), ("N/A", "bold"), (f": {reason}", "yellow"), no_wrap=True, overflow="ellipsis"
            )
        else:
            top = gpu_table(gpus)
        return Group(top, rank_table(ranks)) if ranks else top


def not_available(gpus: GpuStatus | None) -> bool:
    return gpus is None or not gpus.available or not gpus.devices
