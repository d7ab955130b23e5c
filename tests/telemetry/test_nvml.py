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
        "sm_active_pct": None,  # no GPM in this driver
        "tensor_active_pct": None,
        "dram_bw_pct": None,
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


class FakeGpmNvml(FakeNvml):
    """GPM on GPU 0 only (a Hopper beside an older card), with pynvml's own ctypes
    structures and constants: SM 45.5 %, tensor 30.2 %, DRAM bandwidth refused."""

    def __init__(self):
        super().__init__()
        import pynvml

        self.pynvml = pynvml
        self.c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
        for name in ("NVML_GPM_METRICS_GET_VERSION", "NVML_GPM_METRIC_SM_UTIL", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"):
            setattr(self, name, getattr(pynvml, name))
        self.NVML_GPM_METRIC_DRAM_BW_UTIL = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
        self.samples_taken, self.freed, self.gets = [], 0, 0

    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(isSupportedDevice=1 if h == 0 else 0)

    def nvmlGpmSampleAlloc(self):
        return self.pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleFree(self, sample):
        self.freed += 1

    def nvmlGpmSampleGet(self, h, sample):
        self.samples_taken.append(h)
        return sample

    def nvmlGpmMetricsGet(self, mg):
        self.gets += 1
        assert mg.version == self.NVML_GPM_METRICS_GET_VERSION and mg.numMetrics == 3
        values = {self.NVML_GPM_METRIC_SM_UTIL: 45.5, self.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 30.2}
        for j in range(mg.numMetrics):
            m = mg.metrics[j]
            if m.metricId in values:
                m.value, m.nvmlReturn = values[m.metricId], 0
            else:
                m.nvmlReturn = 3  # NVML_ERROR_NOT_SUPPORTED
        return mg


def test_gpm_beside_utilisation_where_the_gpu_has_it():
    """GPM at the pynvml edge (no Hopper here: a stand-in with pynvml's own structures):
    GPU 0 reports SM and tensor activity from its second sample on, DRAM bandwidth refused
    is blank; GPU 1 without GPM is blank and never sampled; the buffers are freed."""
    fake = FakeGpmNvml()
    s = NvmlSampler(nvml=fake, util_interval_s=0.25, proc_interval_s=0.25)
    s.start()
    assert wait_for(lambda: s.snapshot().devices and s.snapshot().devices[0].sm_active_pct is not None)
    s.stop()
    d0, d1 = s.snapshot().devices
    assert (d0.sm_active_pct, d0.tensor_active_pct, d0.dram_bw_pct) == (45.5, 30.2, None) and d0.has_gpm
    assert not d1.has_gpm and set(fake.samples_taken) == {0}
    assert fake.gets == len(fake.samples_taken) - 1  # the first sample only starts the interval
    assert fake.freed == 2 and fake.shutdown
    assert d0.to_json()["sm_active_pct"] == 45.5


def test_a_gpm_read_that_fails_leaves_blank_cells_not_a_dead_sampler():
    fake = FakeGpmNvml()

    def refuse(mg):
        raise FakeNVMLError("GPM: insufficient permissions")

    fake.nvmlGpmMetricsGet = refuse
    s = NvmlSampler(nvml=fake, util_interval_s=0.25, proc_interval_s=0.25)
    s.start()
    assert wait_for(lambda: s.samples >= 3)
    s.stop()
    snap = s.snapshot()
    assert snap.available and snap.devices[0].util == 90 and not snap.devices[0].has_gpm


def test_the_gpu_table_shows_gpm_columns_only_where_a_gpu_has_them():
    from rich.console import Console

    from console.widgets.gpu_table import gpu_table
    from server_control.model.gpu_status import GpuDevice, GpuStatus

    def text(devices):
        console = Console(width=140, record=True)
        console.print(gpu_table(GpuStatus(True, None, devices)))
        return console.export_text()

    plain = GpuDevice(0, "A100", util=99, mem_used_mb=1, mem_total_mb=2, power_w=300, temp_c=60)
    hopper = GpuDevice(1, "H200", util=99, sm_active_pct=41.0, tensor_active_pct=12.0, dram_bw_pct=87.0)
    assert "SM" not in text((plain,)) and "DRAM bw" not in text((plain,))
    both = text((plain, hopper))
    assert "SM" in both and "tensor" in both and "DRAM bw" in both
    row = next(line for line in both.splitlines() if "H200" in line)
    assert "41%" in row and "12%" in row and "87%" in row
