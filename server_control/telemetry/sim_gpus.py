"""The simulator's GPUs behind the NVML interface the sampler uses
(server_control/telemetry/nvml.py): the demo's GPU panel shows utilisation, memory, power,
temperature and the rank processes from ``GET /sim/gpus`` (server_control/protocol/sim_gpus.py)
instead of "N/A", with the same code that reads a real GPU.

A server that does not answer (not up yet, restarting, crashed) reads as what its GPUs
would show: idle, no memory held, no process; NVML itself never fails here. One request
serves every query of a sample (answers are kept ``FRESH_S``); each has a size cap and a
deadline. The devices are named "... (simulated)".
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

from server_control.net import tls
from server_control.net.lean_httpx import httpx
from server_control.protocol import sim_gpus as wire

FRESH_S = 0.2  # one request per sample: the sampler's four queries per device reuse it
TIMEOUT_S = 1.0
NVML_TEMPERATURE_GPU = 0


class SimGpuReader:
    """The subset of pynvml that ``NvmlSampler`` calls, answered by the simulator at ``url``."""

    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU

    def __init__(self, url: str, count: int, api_key: str | None = None) -> None:
        self.url = url.rstrip("/") + wire.PATH
        self.count = max(1, count)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: httpx.Client | None = None
        self._at = -1.0
        self._gpus: list[dict[str, Any]] = []

    # -- what the sampler calls -------------------------------------------------------------
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self._client = httpx.Client(
            timeout=TIMEOUT_S, headers=self.headers, trust_env=False, verify=tls.shared()
        )  # never a proxy

    def nvmlShutdown(self) -> None:  # noqa: N802
        if self._client is not None:
            self._client.close()
            self._client = None

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return str(self._gpu(handle).get("name") or wire.NAME)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        g = self._gpu(handle)
        total = int(g.get("mem_total_mb") or 81559) * 2**20
        return SimpleNamespace(total=total, used=int(g.get("mem_used_mb") or 0) * 2**20)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=int(self._gpu(handle).get("util") or 0), memory=0)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:  # noqa: N802 - milliwatts, as NVML
        return round(float(self._gpu(handle).get("power_w") or 95.0) * 1000)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:  # noqa: N802
        return int(self._gpu(handle).get("temp_c") or 33)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:  # noqa: N802
        return [SimpleNamespace(pid=int(p)) for p in self._gpu(handle).get("pids") or () if isinstance(p, int)]

    # -- the simulator's answer ----------------------------------------------------------------
    def _gpu(self, index: int) -> dict[str, Any]:
        now = time.monotonic()
        if now - self._at > FRESH_S:
            self._at = now
            self._gpus = self._read()
        return self._gpus[index] if 0 <= index < len(self._gpus) else {}

    def _read(self) -> list[dict[str, Any]]:
        """The GPUs the simulator reports; [] (idle, nothing held) when it does not answer."""
        if self._client is None:
            return []
        deadline = time.monotonic() + 2 * TIMEOUT_S
        try:
            with self._client.stream("GET", self.url) as resp:
                if resp.status_code != 200:
                    return []
                body = b""
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > wire.MAX_BYTES or time.monotonic() > deadline:
                        return []
            gpus = json.loads(body).get("gpus")
        except (httpx.HTTPError, ValueError, AttributeError):
            return []
        return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []
