"""The advisor against a simulator with a known crossover (issue 21 goals).

    python -m benchmarks.advise_bench [--time-scale 4] [--json]

advice   per workload, a fresh simulator (KV cost 0.2 ms/1k tokens, exploration share
         0.02, built-in traffic a cosine wave spanning the crossover), the advisor read
         every 15 simulated seconds of traffic: its suggested N against the true N of the
         model (crossover - 1 at the measured mean context and the phase's acceptance).
         Goal: within one bucket by 60 s.
explore  what exploration costs: steady traffic at the threshold, the server's own
         tok/s (tokens / decode seconds on its step clock), share 0 and 0.02 in
         interleaved rounds. Goal: <= 2 %.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import httpx

from server_control.advice.source import read_server
from server_control.advice.words import advise
from server_control.proc.sim_launcher import start_sim
from server_control.protocol.crossover import estimate
from server_control.sim import model

KV = 0.2
WORKLOADS = (
    # name, start N, traffic phase, acceptance p
    ("chat (ctx 500, p 0.78), N starts at 8", 8, "c=1-14,period=15,ctx=500", 0.777),
    ("summarise (ctx 4000, p 0.9), N starts at 5", 5, "c=2-18,period=15,ctx=4000", 0.9),
)


def wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"simulator at {url} not ready in {timeout} s")


def serving_s(url: str) -> float:
    return float(httpx.get(url + "/sim/stats", timeout=5, trust_env=False).json()["serving_seconds"])


def truth(ctx: float | None, p: float) -> int | None:
    cal = dataclasses.replace(model.DEFAULT, kv_ms_per_ktoken=KV)
    cross = model.crossover(cal, context=ctx or 0.0, accept_length=model.expected_accept(p, 3))
    return None if cross is None else cross - 1


def bench_advice(scale: float) -> list[dict]:
    out = []
    for name, n0, phase, p in WORKLOADS:
        traffic = f"phases:s=100000,{phase},p={p}"
        with start_sim(
            "--sim-kv-cost", str(KV), "--sim-explore-share", "0.02", threshold=n0, traffic=traffic, time_scale=scale, lifetime=300
        ) as sim:
            wait_ready(sim.url)
            rows = []
            for at in (15, 30, 45, 60):
                while serving_s(sim.url) < at:
                    time.sleep(0.05)
                r = read_server(sim.url)
                e = estimate(r.curves)
                adv = advise(e, r.threshold)
                want = truth(e.mean_context, p)
                rows.append(
                    {
                        "at_s": at,
                        "suggested": e.suggested,
                        "interval": e.interval,
                        "true_n": want,
                        "ok": e.suggested is not None and want is not None and abs(e.suggested - want) <= 1,
                        "sentence": adv.sentence,
                    }
                )
            out.append({"workload": name, "rows": rows})
    return out


def tok_s(url: str) -> tuple[float, float]:
    (st,) = httpx.get(url + "/server_info", timeout=5, trust_env=False).json()["internal_states"]
    d = st["dynamic_speculation"]
    return float(sum(d["tokens"].values())), float(sum(d["seconds"].values()))


def bench_explore(scale: float, rounds: int = 3, window_s: float = 30.0) -> dict:
    ratios = []
    for _ in range(rounds):
        got = {}
        for share in ("0", "0.02"):  # interleaved: each round runs both
            with start_sim("--sim-explore-share", share, threshold=6, traffic="steady:6", time_scale=scale, lifetime=300) as sim:
                wait_ready(sim.url)
                while serving_s(sim.url) < 3:
                    time.sleep(0.05)
                t0, s0 = tok_s(sim.url)
                while serving_s(sim.url) < 3 + window_s:
                    time.sleep(0.05)
                t1, s1 = tok_s(sim.url)
                got[share] = (t1 - t0) / (s1 - s0)
        ratios.append(got["0.02"] / got["0"])
    return {"ratios": ratios, "mean_cost": 1 - sum(ratios) / len(ratios)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()
    advice = bench_advice(args.time_scale)
    exp = bench_explore(args.time_scale)
    if args.json:
        print(json.dumps({"load": load, "advice": advice, "explore": exp}, indent=2))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, time scale {args.time_scale}")
    for w in advice:
        print(w["workload"])
        for r in w["rows"]:
            print(
                f"  {r['at_s']:3d} s  suggested N={r['suggested']}  interval {r['interval']}  "
                f"true N={r['true_n']}  {'PASS' if r['ok'] else 'miss'}   {r['sentence']}"
            )
    print(
        f"exploration cost at share 0.02: {exp['mean_cost'] * 100:.2f} % (ratios {', '.join(f'{x:.4f}' for x in exp['ratios'])})"
    )


if __name__ == "__main__":
    main()
