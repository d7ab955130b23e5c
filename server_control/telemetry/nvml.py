"""NVML sampler in a worker thread: GPU utilisation, memory, power, temperature, processes.

Utilisation/memory/power/temperature every ``util_interval_s`` (1 s), the process list
every ``proc_interval_s`` (2 s), static facts (name, total memory) once. No interval is
ever below 0.25 s (a process query holds the driver lock for milliseconds).

Any NVML failure - the module missing, ``NVMLError_LibraryNotFound`` ("NVML Shared Library
Not Found", the case on machines without a driver), a driver/library version mismatch,
no permission - gives ``available = False`` with the reason. Nothing here raises into the
caller. The ``nvml`` module can be injected (tests without a GPU use a fake one; the demo's
simulator runs answer through ``gpu_reader_for``: their GPUs over HTTP).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from server_control.model.gpu_status import GpuDevice, GpuStatus
from server_control.telemetry.gpm import METRICS as GPM_METRICS
from server_control.telemetry.gpm import GpmReader
from server_control.telemetry.sim_gpus import SimGpuReader

MIN_INTERVAL_S = 0.25


def load_pynvml() -> Any:
    """The pynvml module from nvidia-ml-py, or raise ImportError."""
    import pynvml  # noqa: PLC0415

    return pynvml


def gpu_reader_for(profile: Any, url: str, api_key: str | None) -> Any:
    """Where the GPU numbers of a profile's run come from: the simulator's stand-in for a
    profile that runs the simulator (its GPUs over HTTP: telemetry/sim_gpus.py), else None
    (the real NVML, loaded by the sampler)."""
    if profile is None or getattr(profile, "kind", None) != "sim":
        return None
    server = profile.server
    return SimGpuReader(url, int(server.get("tp_size", 1)) * int(server.get("dp_size", 1)), api_key)


def error_reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    name = type(exc).__name__
    if isinstance(exc, ImportError):
        return f"pynvml not importable (install nvidia-ml-py): {text}"
    if "Mismatch" in name or "mismatch" in text.lower():
        return f"NVML driver/library version mismatch: {text}"
    return text


class NvmlSampler:
    """``start()`` the thread, ``snapshot()`` from any thread, ``stop()`` to end it.

    ``pids_fn()`` returns the PIDs of the run (server and its children); each device lists
    which of them hold a context on it.
    """

    def __init__(
        self,
        pids_fn: Callable[[], Iterable[int]] | None = None,
        *,
        util_interval_s: float = 1.0,
        proc_interval_s: float = 2.0,
        nvml: Any = None,
        on_update: Callable[[], None] | None = None,
    ) -> None:
        self.pids_fn = pids_fn or (lambda: ())
        self.util_interval_s = max(MIN_INTERVAL_S, util_interval_s)
        self.proc_interval_s = max(MIN_INTERVAL_S, proc_interval_s)
        self.on_update = on_update
        self._nvml = nvml
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._available = False
        self._reason: str | None = "not started"
        self._static: list[dict[str, Any]] = []
        self._devices: list[dict[str, Any]] = []
        self._handles: list[Any] = []
        self._gpm: GpmReader | None = None
        self.samples = 0

    # -- public -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def snapshot(self) -> GpuStatus:
        with self._lock:
            return GpuStatus(
                self._available,
                self._reason,
                tuple(
                    GpuDevice(
                        index=dev["index"],
                        name=dev["name"],
                        util=dev.get("util"),
                        mem_used_mb=dev.get("mem_used_mb"),
                        mem_total_mb=dev.get("mem_total_mb"),
                        power_w=dev.get("power_w"),
                        temp_c=dev.get("temp_c"),
                        pids=tuple(dev.get("pids") or ()),
                        sm_active_pct=dev.get("sm_active_pct"),
                        tensor_active_pct=dev.get("tensor_active_pct"),
                        dram_bw_pct=dev.get("dram_bw_pct"),
                    )
                    for dev in self._devices
                ),
            )

    # -- the worker --------------------------------------------------------------------
    def init(self) -> bool:
        """Load and initialise NVML, read the static facts. False (with the reason) on failure."""
        try:
            if self._nvml is None:
                self._nvml = load_pynvml()
            nv = self._nvml
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            static = []
            for i, h in enumerate(self._handles):
                name = nv.nvmlDeviceGetName(h)
                if isinstance(name, bytes):
                    name = name.decode(errors="replace")
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                static.append({"index": i, "name": name, "mem_total_mb": int(mem.total // 2**20)})
        except Exception as exc:  # noqa: BLE001 - every NVML failure is a reason, never a crash
            self._set_unavailable(error_reason(exc))
            return False
        self._gpm = GpmReader(nv, self._handles)  # per device: GPM where the driver has it
        with self._lock:
            self._static = static
            self._devices = [dict(s, util=None, mem_used_mb=None, power_w=None, temp_c=None, pids=[]) for s in static]
            self._available = True
            self._reason = None if static else "NVML found no GPU"
        return True

    def _set_unavailable(self, reason: str) -> None:
        with self._lock:
            self._available = False
            self._reason = reason
            self._devices = []

    def sample_util(self) -> None:
        """One unsupported query (MIG, vGPU) leaves its field None; if every query of every
        device fails, NVML itself is gone (GPU lost, driver unloaded): raise the last error."""
        nv = self._nvml
        queries: dict[str, Callable[[Any], Any]] = {
            "util": lambda h: int(nv.nvmlDeviceGetUtilizationRates(h).gpu),
            "mem_used_mb": lambda h: int(nv.nvmlDeviceGetMemoryInfo(h).used // 2**20),
            "power_w": lambda h: round(nv.nvmlDeviceGetPowerUsage(h) / 1000.0, 1),
            "temp_c": lambda h: int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        }
        rows: list[tuple[int, dict[str, Any]]] = []
        ok, last_exc = 0, None
        for s, h in zip(self._static, self._handles):
            row: dict[str, Any] = {}
            for key, query in queries.items():
                try:
                    row[key] = query(h)
                    ok += 1
                except Exception as exc:  # noqa: BLE001 - a query a driver lacks is a blank cell, not a dead sampler
                    row[key] = None
                    last_exc = exc
            if self._gpm is not None:  # GPM is extra: it never decides whether NVML is gone
                try:
                    row.update(self._gpm.read(len(rows)))
                except Exception:  # noqa: BLE001 - a GPM read the driver refuses: blank GPM cells
                    row.update({field: None for field, _ in GPM_METRICS})
            rows.append((s["index"], row))
        if rows and not ok and last_exc is not None:
            raise last_exc
        with self._lock:
            for dev, (_, row) in zip(self._devices, rows):
                dev.update(row)
        self.samples += 1

    def sample_processes(self) -> None:
        nv = self._nvml
        try:
            ours = {int(p) for p in self.pids_fn()}
        except Exception:  # noqa: BLE001 - the run vanished between lookups
            ours = set()
        per_dev: list[list[int]] = []
        for h in self._handles:
            pids: set[int] = set()
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                fn = getattr(nv, getter, None)
                if fn is None:
                    continue
                try:
                    pids.update(int(p.pid) for p in fn(h))
                except Exception:  # noqa: BLE001 - a process list a driver refuses leaves that GPU's pids empty
                    pass
            per_dev.append(sorted(pids & ours))
        with self._lock:
            for dev, held in zip(self._devices, per_dev):
                dev["pids"] = held

    def _run(self) -> None:
        if not self.init():
            self._notify()
            return
        next_util = next_proc = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                try:
                    if now >= next_util:
                        self.sample_util()
                        next_util = time.monotonic() + self.util_interval_s
                    if now >= next_proc:
                        self.sample_processes()
                        next_proc = time.monotonic() + self.proc_interval_s
                except Exception as exc:  # noqa: BLE001 - e.g. GPU lost: report, stop sampling
                    self._set_unavailable(f"NVML sampling failed: {error_reason(exc)}")
                    self._notify()
                    return
                self._notify()
                self._stop.wait(max(0.0, min(next_util, next_proc) - time.monotonic()))
        finally:
            if self._gpm is not None:
                self._gpm.close()
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting NVML down on the way out: nothing left to tell
                pass

    def _notify(self) -> None:
        if self.on_update is not None:
            try:
                self.on_update()
            except Exception:  # noqa: BLE001 - a subscriber's bug must not end sampling
                pass
