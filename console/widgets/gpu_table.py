"""GPU table: utilisation, memory, power, temperature and the run's PIDs per GPU; without
NVML one line (no border, no header) with the reason."""
from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from console.widgets.fmt import num
from console.widgets.snapshot_view import SnapshotView
from server_control.model.snapshot import GpuStatus, SessionSnapshot


def gpu_table(gpus: GpuStatus) -> Table:
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="dim")
    for col in ("gpu", "name", "util", "memory", "power", "temp", "pids"):
        table.add_column(col, no_wrap=True)
    for d in gpus.devices:
        util_style = "bold red" if d.util is not None and d.util >= 90 else ""
        mem = f"{num(d.mem_used_mb, '{:.0f}')}/{num(d.mem_total_mb, '{:.0f}')} MB"
        pids = ",".join(str(p) for p in d.pids) or "-"
        table.add_row(str(d.index), d.name, Text(num(d.util, "{:.0f}%"), util_style), mem,
                      num(d.power_w, "{:.0f} W"), num(d.temp_c, "{:.0f}\u00b0C"), pids)
    return table


class GpuTable(SnapshotView):
    DEFAULT_CSS = "GpuTable { height: auto; max-height: 10; }"
    LAYOUT = True  # a row per GPU: the height follows

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "GPUs"

    def pick(self, snap: SessionSnapshot) -> GpuStatus:
        return snap.gpus

    def on_part(self, part: Any) -> None:
        self.set_class(not_available(part), "-na")

    def render(self) -> Table | Text:
        gpus = self.part
        if not_available(gpus):
            reason = gpus.reason or ("no GPU reported" if gpus.available else "NVML unavailable")
            return Text.assemble(("GPUs ", "dim"), ("N/A", "bold"), (f": {reason}", "yellow"), no_wrap=True,
                                 overflow="ellipsis")
        return gpu_table(gpus)


def not_available(gpus: GpuStatus | None) -> bool:
    return gpus is None or not gpus.available or not gpus.devices
