"""NVML GPM (GPU Performance Monitoring) on the GPUs that have it (Hopper and later): SM
activity, tensor-core activity and DRAM bandwidth, in percent, between two samples.

"GPU utilisation" from ``nvmlDeviceGetUtilizationRates`` is the share of time any kernel
ran: ~100 % for a decode loop that keeps one small kernel going, whatever the SMs do. GPM
says how busy the SMs, the tensor cores and the memory really were, which is what tells a
weight-bound decode step (DRAM high, SMs low) from a compute-bound one.

Per device: ``nvmlGpmQueryDeviceSupport`` once (unsupported: no GPM, no error), two
sample buffers (``nvmlGpmSampleAlloc``), and at each ``read`` a new sample
(``nvmlGpmSampleGet``) and the metrics between it and the last one (``nvmlGpmMetricsGet``
with pynvml's ``c_nvmlGpmMetricsGet_t``); the first read after start only takes a sample.
A metric the driver refuses (its ``nvmlReturn`` not 0) is None. Any exception while
setting up leaves the device without GPM; a failing read is raised to the sampler, which
treats it as any failing query (one blank cell, or NVML gone when every query fails).
``close`` frees the buffers.
"""

from __future__ import annotations

from typing import Any

# (field, pynvml's constant name): the percentages shown beside utilisation
METRICS = (
    ("sm_active_pct", "NVML_GPM_METRIC_SM_UTIL"),
    ("tensor_active_pct", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_bw_pct", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)


class GpmReader:
    def __init__(self, nv: Any, handles: list[Any]) -> None:
        self.nv = nv
        self._per: list[dict[str, Any] | None] = [self._setup(h) for h in handles]

    def _setup(self, handle: Any) -> dict[str, Any] | None:
        nv = self.nv
        if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            return None
        try:
            if not nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                return None
            return {"handle": handle, "prev": nv.nvmlGpmSampleAlloc(), "cur": nv.nvmlGpmSampleAlloc(), "taken": False}
        except Exception:  # noqa: BLE001 - a driver without GPM, or refusing it: no GPM on that device
            return None

    @property
    def supported(self) -> list[bool]:
        return [p is not None for p in self._per]

    def read(self, index: int) -> dict[str, float | None]:
        """The GPM percentages of device ``index`` since the last read (all None on a device
        without GPM, and at the first read)."""
        empty: dict[str, float | None] = {field: None for field, _ in METRICS}
        per = self._per[index] if 0 <= index < len(self._per) else None
        if per is None:
            return empty
        nv = self.nv
        nv.nvmlGpmSampleGet(per["handle"], per["cur"])
        if not per["taken"]:
            per["taken"] = True
            per["prev"], per["cur"] = per["cur"], per["prev"]
            return empty
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(METRICS)
        mg.sample1, mg.sample2 = per["prev"], per["cur"]
        for j, (_field, name) in enumerate(METRICS):
            mg.metrics[j].metricId = getattr(nv, name)
        nv.nvmlGpmMetricsGet(mg)
        per["prev"], per["cur"] = per["cur"], per["prev"]
        out = dict(empty)
        for j, (field, _name) in enumerate(METRICS):
            m = mg.metrics[j]
            if int(m.nvmlReturn) == 0:
                out[field] = round(float(m.value), 1)
        return out

    def close(self) -> None:
        for per in self._per:
            if per is None:
                continue
            for key in ("prev", "cur"):
                try:
                    self.nv.nvmlGpmSampleFree(per[key])
                except Exception:  # noqa: BLE001 - freeing on the way out: nothing left to tell
                    pass
        self._per = [None for _ in self._per]
