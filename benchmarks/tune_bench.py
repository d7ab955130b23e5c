"""The self-tuning threshold against fixed thresholds on a two-phase workload (issue 21).

    python -m benchmarks.tune_bench [--time-scale 8] [--phase-s 240] [--rounds 1] [--json]

The workload (simulator, KV cost 0.2 ms/1k tokens, --max-total-tokens 400000): phase A
short chat (prompts ~500 tokens, acceptance p 0.65: the model's crossover 3, N=2), then
phase B long-context summarising (prompts ~12000, p 0.95: speculation faster at every
batch the wave reaches, best N=14); built-in traffic a cosine wave of 1..14 requests with
a 40 s period (longer than a request, so the batch follows the wave).
Arms, one fresh simulator each, run in turn: fixed N = 2, 5, 8, 14, and tuned
(`--sim-auto-tune 1-16`, exploration 0.02, starting at N=5). Per arm and phase, the
server's own tok/s on its step clock (every generated token / step-clock seconds, from
/sim/stats) over the phase after its first 60 s ("settled"), and over the whole run.
Goals: tuned >= 0.97 of the best fixed N in each phase once settled; over the whole run
>= 1.05 of the best single fixed N. ``--rounds R`` runs every arm R times, interleaved (round
1 all arms, then round 2 ...), and compares the arms' means: one arm's figure moves by up
to ~5 % from run to run (the closed loop's batches follow the wall-paced traffic), so
the best of four single figures is biased upward.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import httpx

from benchmarks.advise_bench import wait_ready
from server_control.proc.sim_launcher import start_sim

KV = "0.2"
FIXED = (2, 5, 8, 14)
PHASE_A = "ctx=500,p=0.65"
PHASE_B = "ctx=12000,p=0.95"
WAVE = "c=1-14,period=40"
START_N = 5


def _live(url: str) -> dict:
    (st,) = httpx.get(url + "/server_info", timeout=5, trust_env=False).json()["internal_states"]
    return st["dynamic_speculation"]


def _serving(url: str) -> float:
    r = httpx.get(url + "/sim/stats", timeout=5, trust_env=False)
    if r.status_code != 200:
        raise SystemExit(f"{url}/sim/stats: HTTP {r.status_code} {r.text[:200]!r} (another server on the port?)")
    return float(r.json()["serving_seconds"])


def _totals(url: str) -> tuple[float, float]:
    """Every generated token (prefill's first ones too) and the step clock: tok/s that a
    faster mode's extra prefills do not bias."""
    st = httpx.get(url + "/sim/stats", timeout=5, trust_env=False).json()
    return float(st["generation_tokens_total"]), float(st["step_clock_s"])


def run_arm(n: int, tuned: bool, scale: float, phase_s: float) -> dict:
    traffic = f"phases:s={phase_s},{WAVE},{PHASE_A}/s={phase_s},{WAVE},{PHASE_B}"
    extra = ["--sim-kv-cost", KV, "--max-total-tokens", "400000"]
    if tuned:
        extra += ["--sim-auto-tune", "1-16", "--sim-explore-share", "0.02"]
    marks = {}
    with start_sim(*extra, threshold=n, traffic=traffic, time_scale=scale, lifetime=900) as sim:
        wait_ready(sim.url)
        for name, at in (
            ("start", 0.5),
            ("a60", 60.0),
            ("a_end", phase_s),
            ("b60", phase_s + 60.0),
            ("b_end", 2 * phase_s - 0.5),
        ):
            while _serving(sim.url) < at:
                time.sleep(0.05)
            marks[name] = _totals(sim.url)
        live = _live(sim.url)
        moves = [ln for ln in sim.log_path.read_text().splitlines() if "(auto: " in ln]

    def rate(a: str, b: str) -> float:
        (t0, s0), (t1, s1) = marks[a], marks[b]
        return (t1 - t0) / (s1 - s0) if s1 > s0 else 0.0

    return {
        "arm": "tuned" if tuned else f"N={n}",
        "a_settled": rate("a60", "a_end"),
        "b_settled": rate("b60", "b_end"),
        "a_all": rate("start", "a_end"),
        "b_all": rate("a_end", "b_end"),
        "whole": rate("start", "b_end"),
        "final_n": live["threshold"],
        "moves": moves,
    }


def _mean(runs: list[dict]) -> dict:
    """One arm over the rounds: the mean of each figure, the last round's final N and moves."""
    keys = ("a_settled", "b_settled", "a_all", "b_all", "whole")
    return dict(runs[-1], **{k: sum(r[k] for r in runs) / len(runs) for k in keys})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-scale", type=float, default=8.0)
    ap.add_argument("--phase-s", type=float, default=240.0)
    ap.add_argument("--rounds", type=int, default=1, help="runs of every arm, interleaved; the means are compared")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()
    rounds = []
    for _ in range(args.rounds):
        arms = [run_arm(n, False, args.time_scale, args.phase_s) for n in FIXED]
        arms.append(run_arm(START_N, True, args.time_scale, args.phase_s))
        rounds.append(arms)
    arms = [_mean([r[i] for r in rounds]) for i in range(len(rounds[0]))]
    fixed, tuned = arms[:-1], arms[-1]
    best_a = max(a["a_settled"] for a in fixed)
    best_b = max(a["b_settled"] for a in fixed)
    best_whole = max(a["whole"] for a in fixed)
    verdict = {"a": tuned["a_settled"] / best_a, "b": tuned["b_settled"] / best_b, "whole": tuned["whole"] / best_whole}
    if args.json:
        print(json.dumps({"load": load, "rounds": rounds, "arms": arms, "ratios": verdict}, indent=2))
        return
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} -> {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
        f"time scale {args.time_scale}, phases of {args.phase_s:.0f} s, {args.rounds} round(s), means"
    )
    print("arm        A settled   B settled   A all   B all   whole   final N")
    for a in arms:
        print(
            f"{a['arm']:<8} {a['a_settled']:10.1f} {a['b_settled']:11.1f} {a['a_all']:7.1f} {a['b_all']:7.1f} "
            f"{a['whole']:7.1f}   {a['final_n']}"
        )
    print(
        f"tuned / best fixed: phase A {verdict['a']:.3f}, phase B {verdict['b']:.3f} (goal >= 0.97), "
        f"whole run {verdict['whole']:.3f} vs the best single N (goal >= 1.05)"
    )
    for i, r in enumerate(rounds, 1):
        print(f"round {i}: " + "  ".join(f"{a['arm']} {a['a_settled']:.1f}/{a['b_settled']:.1f}/{a['whole']:.1f}" for a in r))
        for line in r[-1]["moves"]:
            print("  " + line.split("] ", 1)[-1])


if __name__ == "__main__":
    main()
