"""The GPUs a session samples (telemetry/nvml.py), as frozen dataclasses: one ``GpuDevice``
per device and the ``GpuStatus`` of all of them (or why there are none), with the
``to_json()``/``from_json()`` of the `status --json` ``gpus`` part (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model.json_read import as_int, as_list, as_num, as_obj, as_str

__all__ = ["GpuDevice", "GpuStatus"]


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    util: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    pids: tuple[int, ...] = ()
    # NVML GPM (Hopper and later; None elsewhere): SM, tensor-core and DRAM-bandwidth activity, %
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None

    @property
    def has_gpm(self) -> bool:
        return any(v is not None for v in (self.sm_active_pct, self.tensor_active_pct, self.dram_bw_pct))

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "util": self.util,
            "mem_used_mb": self.mem_used_mb,
            "mem_total_mb": self.mem_total_mb,
            "power_w": self.power_w,
            "temp_c": self.temp_c,
            "pids": list(self.pids),
            "sm_active_pct": self.sm_active_pct,
            "tensor_active_pct": self.tensor_active_pct,
            "dram_bw_pct": self.dram_bw_pct,
        }

    @classmethod
    def from_json(cls, raw: object) -> GpuDevice | None:
        r = as_obj(raw)
        if as_int(r.get("index")) is None:
            return None
        return cls(
            index=as_int(r.get("index")) or 0,
            name=as_str(r.get("name")) or "?",
            util=as_num(r.get("util")),
            mem_used_mb=as_num(r.get("mem_used_mb")),
            mem_total_mb=as_num(r.get("mem_total_mb")),
            power_w=as_num(r.get("power_w")),
            temp_c=as_num(r.get("temp_c")),
            pids=tuple(p for p in map(as_int, as_list(r.get("pids"))) if p is not None),
            sm_active_pct=as_num(r.get("sm_active_pct")),
            tensor_active_pct=as_num(r.get("tensor_active_pct")),
            dram_bw_pct=as_num(r.get("dram_bw_pct")),
        )


@dataclass(frozen=True)
class GpuStatus:
    available: bool = False
    reason: str | None = "not sampled yet"
    devices: tuple[GpuDevice, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason, "devices": [d.to_json() for d in self.devices]}

    @classmethod
    def from_json(cls, raw: object) -> GpuStatus:
        r = as_obj(raw)
        return cls(
            available=r.get("available") is True,
            reason=as_str(r.get("reason")),
            devices=tuple(d for d in map(GpuDevice.from_json, as_list(r.get("devices"))) if d is not None),
        )
