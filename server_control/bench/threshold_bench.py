"""Threshold set -> read-back latency: POST /set_internal_state, then GET /server_info until
every DP rank shows the new value (exactly what ``server_control.control.Control`` does).

    python -m server_control.bench.threshold_bench [--iterations 200] [--tp 2] [--traffic wave]
    python -m server_control.bench.threshold_bench --url http://127.0.0.1:30000   # a live server

Without --url it starts the simulator itself (own process group, bounded lifetime, free
port on 127.0.0.1) and stops that group at the end. Prints p50/p90/p99/max in ms (goal:
p99 < 250 ms against the simulator); --json for one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from server_control.control import Control

GOAL_P99_MS = 250.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sim(tp: int, traffic: str, time_scale: float, lifetime: float) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="threshold-bench-")) / "sim.log"
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    argv = [sys.executable, "-m", "server_control.sim", "--model-path", "sim/model", "--tp-size", str(tp),
            "--host", "127.0.0.1", "--port", str(port), "--speculative-algorithm", "EAGLE3",
            "--speculative-disable-batch-threshold", "5", "--sim-traffic", traffic,
            "--sim-time-scale", str(time_scale), "--sim-max-lifetime", str(lifetime)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"simulator exited ({proc.returncode}); log {log}")
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return proc, url, log
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    stop_group(proc)
    raise RuntimeError(f"simulator not ready after 60 s; log {log}")


def stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


async def measure(url: str, iterations: int, warmup: int = 5) -> tuple[list[float], list[str]]:
    control = Control(url, admin_api_key=os.environ.get("SPECCONSOLE_ADMIN_API_KEY") or None)
    lat, failures = [], []
    try:
        for i in range(warmup + iterations):
            n = 5 + (i % 4)  # 5, 6, 7, 8, 5, ...: always a change
            t0 = time.perf_counter()
            result = await control.set_threshold(n)
            dt = (time.perf_counter() - t0) * 1000
            if result["state"] != "applied":
                failures.append(f"{n}: {result['state']}: {result['detail']}")
            elif i >= warmup:
                lat.append(dt)
        await control.set_threshold(5)
    finally:
        await control.aclose()
    return lat, failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m server_control.bench.threshold_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="measure this server instead of starting the simulator")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--traffic", default="wave:12:20", help="simulator traffic (default wave:12:20)")
    p.add_argument("--time-scale", type=float, default=20.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.iterations < 1:
        p.error("--iterations must be >= 1")
    proc = None
    url = a.url
    if url is None:
        proc, url, _log = start_sim(a.tp, a.traffic, a.time_scale, lifetime=600)
    try:
        lat, failures = asyncio.run(measure(url, a.iterations))
    finally:
        if proc is not None:
            stop_group(proc)
    lat.sort()
    out = {"url": url, "simulator": proc is not None, "tp": a.tp if proc else None,
           "traffic": a.traffic if proc else None, "iterations": len(lat), "failures": failures[:5],
           "failed": len(failures), "p50_ms": round(percentile(lat, 50), 2), "p90_ms": round(percentile(lat, 90), 2),
           "p99_ms": round(percentile(lat, 99), 2), "max_ms": round(lat[-1], 2) if lat else None,
           "mean_ms": round(statistics.fmean(lat), 2) if lat else None, "goal_p99_ms": GOAL_P99_MS}
    out["meets_goal"] = bool(lat) and not failures and out["p99_ms"] < GOAL_P99_MS
    if a.json:
        print(json.dumps(out))
    else:
        print(f"threshold set -> read-back on every DP rank, {out['iterations']} changes against {url}"
              + (f" (simulator tp={a.tp}, traffic {a.traffic})" if proc else ""))
        print(f"  p50 {out['p50_ms']} ms   p90 {out['p90_ms']} ms   p99 {out['p99_ms']} ms   "
              f"max {out['max_ms']} ms   mean {out['mean_ms']} ms")
        print(f"  failures {out['failed']}" + (f": {failures[:3]}" if failures else ""))
        print(f"  goal p99 < {GOAL_P99_MS:g} ms: {'met' if out['meets_goal'] else 'NOT met'}")
    return 0 if out["meets_goal"] else 1


if __name__ == "__main__":
    sys.exit(main())
