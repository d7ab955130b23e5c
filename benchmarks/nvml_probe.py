"""The console's NVML sampler (server_control/telemetry/nvml.py) against a real GPU.

    python -m benchmarks.nvml_probe [--seconds 10] [--json FILE]

An idle baseline, then a torch matmul load in a child process (its own CUDA context)
while ``NvmlSampler`` runs its thread (0.5 s intervals, ``pids_fn`` = the child): prints
utilisation, memory, power, temperature per phase, whether the child's pid showed up on
the device (NVML lists processes by the pids of its own namespace), the raw process list,
and what one sample costs (``sample_util``, ``sample_processes``, 50 calls each). Exit 1 when
NVML is unavailable or the load was not seen (utilisation or memory did not rise).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from server_control.telemetry.nvml import NvmlSampler

LOAD = (
    "import sys, time, torch\n"
    "x = torch.randn(8192, 8192, device='cuda')\n"
    "print('ready', flush=True)\n"
    "end = time.time() + float(sys.argv[1])\n"
    "while time.time() < end:\n"
    "    y = x @ x\n"
    "    torch.cuda.synchronize()\n"
)


def _watch(sampler: NvmlSampler, seconds: float) -> list[dict]:
    rows, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)
        rows.append(sampler.snapshot().devices[0].to_json())
    return rows


def _phase(rows: list[dict]) -> dict:
    def top(key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return max(values) if values else None

    return {
        "samples": len(rows),
        "util_max": top("util"),
        "mem_used_mb_max": top("mem_used_mb"),
        "power_w_max": top("power_w"),
        "temp_c_max": top("temp_c"),
        "pids_seen": sorted({p for r in rows for p in r.get("pids", [])}),
    }


def _cost_us(fn, n: int = 50) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return round((time.perf_counter() - t0) / n * 1e6, 1)


def probe(seconds: float) -> dict:
    child: list[int] = []
    sampler = NvmlSampler(lambda: child, util_interval_s=0.5, proc_interval_s=0.5)
    sampler.start()
    time.sleep(1.0)
    snap = sampler.snapshot()
    if not snap.available or not snap.devices:
        sampler.stop()
        return {"available": False, "reason": snap.reason}
    dev = snap.devices[0]
    out = {
        "available": True,
        "static": {"index": dev.index, "name": dev.name, "mem_total_mb": dev.mem_total_mb},
        "gpus": len(snap.devices),
        "idle": _phase(_watch(sampler, 2.0)),
    }
    load = subprocess.Popen([sys.executable, "-c", LOAD, str(seconds)], stdout=subprocess.PIPE, text=True)
    try:
        ready = load.stdout.readline().strip() == "ready"
        child.append(load.pid)
        out["load"] = _phase(_watch(sampler, max(1.0, seconds - 2.0)))
        nv = sampler._nvml
        handle = nv.nvmlDeviceGetHandleByIndex(0)
        out["nvml_processes_raw"] = [
            {"pid": int(p.pid), "used_mb": (p.usedGpuMemory or 0) >> 20} for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)
        ]
        out["child_pid"], out["load_started"] = load.pid, ready
        out["cost_us"] = {"sample_util": _cost_us(sampler.sample_util), "sample_processes": _cost_us(sampler.sample_processes)}
    finally:
        load.wait(timeout=seconds + 60)
        sampler.stop()
    idle, busy = out["idle"], out["load"]
    out["load_seen"] = bool(
        busy["util_max"]
        and busy["util_max"] > (idle["util_max"] or 0)
        and busy["mem_used_mb_max"] > (idle["mem_used_mb_max"] or 0) + 1024
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.nvml_probe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--json", help="also write the result here")
    opts = p.parse_args(argv)
    result = probe(opts.seconds)
    text = json.dumps(result, indent=1)
    print(text)
    if opts.json:
        with open(opts.json, "w") as f:
            f.write(text)
    return 0 if result.get("available") and result.get("load_seen") else 1


if __name__ == "__main__":
    sys.exit(main())
