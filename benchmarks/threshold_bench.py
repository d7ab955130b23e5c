"""Threshold set -> read-back latency: POST /set_internal_state, then GET /server_info until
every DP rank shows the new value (exactly what ``server_control.control.settings.Control`` does).

    python -m benchmarks.threshold_bench [--iterations 200] [--tp 2] [--traffic wave]
    python -m benchmarks.threshold_bench --url http://127.0.0.1:30000   # a live server

Without --url it starts the simulator itself (own process group, bounded lifetime, free
port on 127.0.0.1) and stops that group at the end. Prints p50/p90/p99/max in ms (goal:
p99 < 250 ms against the simulator); --json for one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from server_control.control.settings import Control
from server_control.proc.sim_launcher import start_sim
from server_control.protocol.runtime_settings import THRESHOLD

GOAL_P99_MS = 250.0


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
            result = await control.set_setting(THRESHOLD.key, n)
            dt = (time.perf_counter() - t0) * 1000
            if result.state != "applied":
                failures.append(f"{n}: {result.state}: {result.detail}")
            elif i >= warmup:
                lat.append(dt)
        await control.set_setting(THRESHOLD.key, 5)
    finally:
        await control.aclose()
    return lat, failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.threshold_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
        proc = start_sim(tp=a.tp, traffic=a.traffic, time_scale=a.time_scale, lifetime=600).wait_ready()
        url = proc.url
    try:
        lat, failures = asyncio.run(measure(url, a.iterations))
    finally:
        if proc is not None:
            proc.stop()
    lat.sort()
    out = {
        "url": url,
        "simulator": proc is not None,
        "tp": a.tp if proc else None,
        "traffic": a.traffic if proc else None,
        "iterations": len(lat),
        "failures": failures[:5],
        "failed": len(failures),
        "p50_ms": round(percentile(lat, 50), 2),
        "p90_ms": round(percentile(lat, 90), 2),
        "p99_ms": round(percentile(lat, 99), 2),
        "max_ms": round(lat[-1], 2) if lat else None,
        "mean_ms": round(statistics.fmean(lat), 2) if lat else None,
        "goal_p99_ms": GOAL_P99_MS,
    }
    out["meets_goal"] = bool(lat) and not failures and out["p99_ms"] < GOAL_P99_MS
    if a.json:
        print(json.dumps(out))
    else:
        print(
            f"threshold set -> read-back on every DP rank, {out['iterations']} changes against {url}"
            + (f" (simulator tp={a.tp}, traffic {a.traffic})" if proc else "")
        )
        print(
            f"  p50 {out['p50_ms']} ms   p90 {out['p90_ms']} ms   p99 {out['p99_ms']} ms   "
            f"max {out['max_ms']} ms   mean {out['mean_ms']} ms"
        )
        print(f"  failures {out['failed']}" + (f": {failures[:3]}" if failures else ""))
        print(f"  goal p99 < {GOAL_P99_MS:g} ms: {'met' if out['meets_goal'] else 'NOT met'}")
    return 0 if out["meets_goal"] else 1


if __name__ == "__main__":
    sys.exit(main())
