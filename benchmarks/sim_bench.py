"""Benchmark of the simulator itself: can it hold 256 concurrent streaming requests on
this machine with its step times within 10 % of the model's? Prints the figures.

    python -m benchmarks.sim_bench [--concurrency 256] [--measure 10] [--json]

Phases (time scale 1, tp 2, threshold 5):
  1. forced target-only at --concurrency streams (long requests)
  2. forced speculative at --concurrency streams (2 s steps: a longer window)
  3. forced speculative at 64 streams;  4. forced speculative at 1 stream
  5. idle: CPU of every simulator process over 5 s with no work
For each load phase: client-side tok/s against the model's, and the simulator's own
step-time error (actual wall interval of back-to-back steps vs the model's step time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import httpx
import psutil

from server_control.bench import loadgen
from server_control.proc.sim_launcher import SimProcess, group_pids, start_sim
from server_control.protocol import decision
from server_control.sim import model

MODEL_MODE = {decision.SPECULATIVE: model.SPECULATIVE, decision.TARGET_ONLY: model.TARGET_ONLY}


def group_processes(pgid: int) -> list[psutil.Process]:
    out = []
    for pid in group_pids(pgid):
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return out


def cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


async def phase(
    sim: SimProcess, name: str, concurrency: int, mode: str, max_tokens: int, warmup_s: float, measure_s: float
) -> dict:
    if mode != "auto":
        assert await loadgen.set_force(sim.url, mode), f"could not force {mode}"
    procs = group_processes(sim.pgid)
    me = psutil.Process()
    async with httpx.AsyncClient(trust_env=False) as client:
        await client.get(sim.url + "/sim/stats", params={"reset": 1})
    cpu0, mine0, t0 = cpu_seconds(procs), cpu_seconds([me]), time.monotonic()
    r = await loadgen.run_level(sim.url, concurrency, warmup_s=warmup_s, measure_s=measure_s, max_tokens=max_tokens, mode=mode)
    elapsed = time.monotonic() - t0
    cpu1, mine1 = cpu_seconds(procs), cpu_seconds([me])
    async with httpx.AsyncClient(trust_env=False) as client:
        stats = (await client.get(sim.url + "/sim/stats")).json()
        state = (await client.get(sim.url + "/server_info")).json()["internal_states"][0]
    ran_mode = state[decision.STATE_KEY]["mode"]
    expected = model.throughput(MODEL_MODE[ran_mode], concurrency)
    timing = stats["step_timing"]
    return {
        "phase": name,
        "concurrency": concurrency,
        "mode": ran_mode,
        "tok_s": round(r.tok_s, 1),
        "model_tok_s": round(expected, 1),
        "tok_s_error": round(r.tok_s / expected - 1, 4),
        "steps_timed": timing["steps"],
        "step_mean_abs_error": _r(timing["mean_abs_error"]),
        "step_mean_error": _r(timing["mean_error"]),
        "step_p99_abs_error": _r(timing["p99"]),
        "lag_s": timing["lag_s"],
        "errors": r.errors,
        "error_sample": r.error_sample,
        "ttft_p50_s": _r(r.ttft_p50_s),
        "sim_cpu_pct": round(100 * (cpu1 - cpu0) / elapsed, 1),
        "loadgen_cpu_pct": round(100 * (mine1 - mine0) / elapsed, 1),
    }


def _r(x):
    return None if x is None else round(x, 4)


async def idle_cpu(sim: SimProcess, seconds: float = 5.0) -> dict:
    await loadgen.set_force(sim.url, decision.AUTO)
    async with httpx.AsyncClient(trust_env=False) as client:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            load = (await client.get(sim.url + "/v1/loads")).json()["loads"][0]
            if load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0:
                break
            await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)
    procs = group_processes(sim.pgid)
    c0 = cpu_seconds(procs)
    await asyncio.sleep(seconds)
    return {"phase": "idle", "processes": len(procs), "sim_cpu_pct": round(100 * (cpu_seconds(procs) - c0) / seconds, 2)}


async def run(args) -> dict:
    rows = []
    with start_sim(tp=2, threshold=5, time_scale=1.0, lifetime=args.measure * 6 + 300) as sim:
        sim.wait_ready()
        c = args.concurrency
        rows.append(await phase(sim, f"target-only-{c}", c, decision.TARGET_ONLY, 1024, args.warmup, args.measure))
        rows.append(await phase(sim, f"spec-{c}", c, decision.SPECULATIVE, 1024, args.warmup, 2 * args.measure))
        rows.append(await phase(sim, "spec-64", 64, decision.SPECULATIVE, 512, args.warmup, args.measure))
        rows.append(await phase(sim, "spec-1", 1, decision.SPECULATIVE, 512, 1.0, args.measure))
        rows.append(await idle_cpu(sim))
    worst = max(abs(r["step_mean_abs_error"] or 0) for r in rows if "step_mean_abs_error" in r)
    return {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "rows": rows,
        "worst_step_mean_abs_error": worst,
        "goal": 0.10,
        "pass": worst < 0.10,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.sim_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--warmup", type=float, default=4.0)
    p.add_argument("--measure", type=float, default=10.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for r in result["rows"]:
            print("  ".join(f"{k}={v}" for k, v in r.items() if v is not None))
        print(
            f"worst mean |step-time error| = {result['worst_step_mean_abs_error']:.2%} "
            f"(goal < 10%): {'PASS' if result['pass'] else 'FAIL'}"
        )
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
