"""GPU table: utilisation, memory, power, temperature and the run's PIDs per GPU; one N/A
row with the reason when NVML is unavailable."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from console.widgets.fmt import num, section


def gpu_table(snap: dict) -> Table:
    gpus = section(snap, "gpus")
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="dim")
    for col in ("gpu", "name", "util", "memory", "power", "temp", "pids"):
        table.add_column(col, no_wrap=True)
    devices = [d for d in gpus.get("devices") or [] if isinstance(d, dict)]
    if not gpus.get("available") or not devices:
        reason = gpus.get("reason") or ("no GPU reported" if gpus.get("available") else "NVML unavailable")
        table.add_row("N/A", Text(str(reason), "yellow"), "", "", "", "", "")
        return table
    for d in devices:
        util = d.get("util")
        util_style = "bold red" if isinstance(util, (int, float)) and util >= 90 else ""
        mem = f"{num(d.get('mem_used_mb'), '{:.0f}')}/{num(d.get('mem_total_mb'), '{:.0f}')} MB"
        pids = ",".join(str(p) for p in d.get("pids") or []) or "-"
        table.add_row(str(d.get("index", "?")), str(d.get("name") or "?"),
                      Text(num(util, "{:.0f}%"), util_style), mem,
                      num(d.get("power_w"), "{:.0f} W"), num(d.get("temp_c"), "{:.0f}\u00b0C"), pids)
    return table


class GpuTable(Widget):
    DEFAULT_CSS = "GpuTable { height: auto; max-height: 10; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._snap: dict = {}
        self.border_title = "GPUs"

    def show(self, snap: dict) -> None:
        if section(snap, "gpus") != section(self._snap, "gpus"):
            self._snap = snap
            self.refresh(layout=True)
        self._snap = snap

    def render(self):
        return gpu_table(self._snap)
