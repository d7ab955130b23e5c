"""NVML sampler: the real N/A path on this machine, the sampling logic with a fake NVML
module injected at the edge (the only mock allowed: there is no GPU here)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from server_control.telemetry.nvml import MIN_INTERVAL_S, NvmlSampler, error_reason


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def real_nvml_available() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:  # noqa: BLE001 - any failure means no real NVML here
        return False


@pytest.mark.skipif(real_nvml_available(), reason="this machine has a working NVML")
def test_real_nvml_missing_gives_na_with_reason():
    updates = []
    s = NvmlSampler(on_update=lambda: updates.append(1))
    s.start()
    assert wait_for(lambda: updates)
    s.stop()
    snap = s.snapshot().to_json()
    assert snap["available"] is False
    assert snap["devices"] == []
    assert "NVML" in snap["reason"] or "pynvml" in snap["reason"]


class FakeNVMLError(Exception):
    pass


class FakeNvml:
    """Two GPUs; process lists hold one PID of ours and one stranger each."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self, fail_init=None):
        self.fail_init = fail_init
        self.lost = False
        self.util_calls = 0
        self.proc_calls = 0
        self.shutdown = False

    def nvmlInit(self):
        if self.fail_init:
            raise self.fail_init

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3" if h == 0 else "NVIDIA H100 80GB HBM3"

    def _check(self):
        if self.lost:
            raise FakeNVMLError("GPU is lost")

    def nvmlDeviceGetMemoryInfo(self, h):
        self._check()
        return SimpleNamespace(total=80 * 2**30, used=(10 + h) * 2**30)

    def nvmlDeviceGetUtilizationRates(self, h):
        self.util_calls += 1
        self._check()
        return SimpleNamespace(gpu=90 + h)

    def nvmlDeviceGetPowerUsage(self, h):
        self._check()
        return 350_500

    def nvmlDeviceGetTemperature(self, h, kind):
        self._check()
        if h == 1:
            raise FakeNVMLError("Not Supported")
        return 61

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self.proc_calls += 1
        return [SimpleNamespace(pid=1000 + h), SimpleNamespace(pid=5)]


def test_sampling_maps_run_pids_to_gpus():
    fake = FakeNvml()
    s = NvmlSampler(lambda: [1000, 1001, 77], nvml=fake, util_interval_s=0.25, proc_interval_s=0.25)
    s.start()
    assert wait_for(lambda: s.snapshot().to_json()["devices"] and s.snapshot().to_json()["devices"][1]["pids"])
    s.stop()
    snap = s.snapshot().to_json()
    assert snap["available"] is True and snap["reason"] is None
    d0, d1 = snap["devices"]
    assert d0 == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "mem_total_mb": 81920,
        "util": 90,
        "mem_used_mb": 10240,
        "power_w": 350.5,
        "temp_c": 61,
        "pids": [1000],
    }
    assert d1["pids"] == [1001] and d1["util"] == 91
    assert d1["temp_c"] is None  # an unsupported query leaves None, not a crash
    assert fake.shutdown


def test_intervals_never_below_floor():
    s = NvmlSampler(nvml=FakeNvml(), util_interval_s=0.001, proc_interval_s=0.0)
    assert s.util_interval_s == MIN_INTERVAL_S and s.proc_interval_s == MIN_INTERVAL_S


def test_driver_library_mismatch_is_na():
    class NVMLError_LibRmVersionMismatch(Exception):
        pass

    s = NvmlSampler(nvml=FakeNvml(fail_init=NVMLError_LibRmVersionMismatch("RM has detected an NVML/RM version mismatch.")))
    assert s.init() is False
    snap = s.snapshot().to_json()
    assert snap["available"] is False
    assert snap["reason"].startswith("NVML driver/library version mismatch")


def test_gpu_lost_while_sampling_gives_na_and_thread_ends():
    fake = FakeNvml()
    s = NvmlSampler(nvml=fake, util_interval_s=0.25)
    s.start()
    assert wait_for(lambda: fake.util_calls >= 2)
    fake.lost = True  # every query now raises, as NVML does after "GPU is lost"
    assert wait_for(lambda: not s.snapshot().to_json()["available"])
    s._thread.join(5)
    assert not s._thread.is_alive()
    assert s.snapshot().to_json()["reason"] == "NVML sampling failed: GPU is lost"


def test_pids_fn_raising_is_tolerated():
    def boom():
        raise ProcessLookupError("gone")

    s = NvmlSampler(boom, nvml=FakeNvml())
    assert s.init()
    s.sample_processes()
    assert [d["pids"] for d in s.snapshot().to_json()["devices"]] == [[], []]


def test_import_error_reason():
    assert "nvidia-ml-py" in error_reason(ImportError("No module named 'pynvml'"))
