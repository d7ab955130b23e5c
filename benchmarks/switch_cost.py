"""What switching costs on the real patched server: the CPU rig's EAGLE-3 pair.

    python -m benchmarks.switch_cost [--models trained] [--threshold 4] [--clients 6]
                                     [--rounds 3] [--warmup 3] [--measure 20]
                                     [--tokens 16,64] [--pause 0,0.67] [--threads 1]
                                     [--resume-steps 200] [--json] [--out FILE]

Starts the patched server (tests/real_sglang/rig, ``--enable-metrics``, the per-step trace
of rig/step_timing.py) and sets threshold ``--threshold`` with the patch's default hysteresis
and dwell (decision.DEFAULT_HYSTERESIS / DEFAULT_MIN_DWELL_STEPS: 1 and 10 steps). The workload makes the
decode batch hover around N: ``--clients`` closed-loop clients, each request of a random
length in ``--tokens`` followed by a pause of a random fraction in ``--pause`` of that
request's own duration (seeded per round: every arm of a round replays the same draws).
The pause scales with the request, so each client is busy ~1 / (1 + mean fraction) of the
time whatever a step costs and whichever mode runs: 6 clients at 0-0.67 hold ~4.5
requests on average, crossing N = 4 both ways. Three arms, every round each once,
the order rotated, the server drained before each window:

  auto         force auto: the rule switches while the batch crosses N
  speculative  forced speculative
  target_only  forced target-only

Each window's mode share comes from the patch's counters (referee.window): a forced
arm with any step in the other mode is a PROBLEM, and so is an auto window that never
switched (the workload did not hover). Per window: client tok/s, switches (the patch's
``switch_count``), decode steps per mode, and from the trace (benchmarks/switch_trace.py)
the per-switch latency: the first step after each switch against the steady steps of the
same mode and batch size, both directions, and auto's step times per mode and batch size.
Per round: auto / max(speculative, target-only), auto / the mode mix (each mode's share of
auto's decode time at that mode's forced tok/s) and auto's steps against the forced arms'
steps of the same mode and batch size. ``--summarise FILE`` prints a saved ``--out`` again.

Then the acceptance check: ``--clients`` clients without pauses, forced speculative for
``--resume-steps`` steps, forced target-only for 60 steps, forced speculative for
``--resume-steps`` more, requests running across both switches; the accept length over
the speculative steps before the switch and the first ``--resume-steps`` after resuming
(goal: after >= 0.98 x before). Figures go in docs/cpu-rig.md with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import httpx

from benchmarks import rig_run, switch_trace
from server_control.bench import loadgen, referee
from server_control.protocol import decision

AUTO, SPEC, TARGET = decision.AUTO, decision.SPECULATIVE, decision.TARGET_ONLY
ARMS = (AUTO, SPEC, TARGET)
SERVER_EXTRA = ("--decode-log-interval", "40", "--max-total-tokens", "8192", "--enable-metrics")


def _pair(text: str, kind=float) -> tuple:
    a, b = (kind(x) for x in text.split(","))
    if a > b or a < 0:
        raise argparse.ArgumentTypeError(f"want LOW,HIGH with 0 <= LOW <= HIGH, got {text!r}")
    return a, b


def draws(seed: int, n: int, tokens: tuple[int, int], pause: tuple[float, float]) -> list[tuple[int, float]]:
    """One client's request lengths and pause fractions (the same for every arm of a round)."""
    rng = random.Random(seed)
    return [(rng.randint(*tokens), rng.uniform(*pause)) for _ in range(n)]


def arm_problem(arm: str, steps_window: dict | None, switches: int | None) -> str | None:
    """Why a window is not what its arm claims (None: it is)."""
    problem = referee.share_problem(arm, steps_window)
    if problem or arm != AUTO:
        return problem
    if steps_window is None or steps_window.get("steps") is None:
        return "auto: the server published no step counters"
    if not switches:
        return "auto: no switch in the window (the batch did not cross the threshold)"
    steps = steps_window["steps"]
    if not steps.get(SPEC) or not steps.get(TARGET):
        return f"auto: the window ran one mode only (steps {steps})"
    return None


async def _switch_count(client: httpx.AsyncClient, url: str) -> int | None:
    resp = await client.get(url + "/server_info", timeout=10.0)
    states = resp.json().get("internal_states") or []
    counts = [s[decision.STATE_KEY].get("switch_count") for s in states if decision.STATE_KEY in s]
    return int(counts[0]) if counts and isinstance(counts[0], int) else None


async def _set(client: httpx.AsyncClient, url: str, values: dict) -> None:
    resp = await client.post(url + "/set_internal_state", json={"server_args": values})
    if resp.status_code != 200 or resp.json() != [True]:
        raise RuntimeError(f"the server refused {values}: {resp.status_code} {resp.text[:200]}")


async def _client(client, url, plan, result, window) -> None:
    for max_tokens, pause in plan:
        if time.monotonic() >= window[1]:
            return
        began = time.monotonic()
        try:
            await loadgen._one_request(client, url, loadgen.stream_body(max_tokens), result, window, None)
        except (httpx.HTTPError, RuntimeError, ValueError) as exc:
            result.errors += 1
            result.error_sample = result.error_sample or f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(pause * (time.monotonic() - began))


async def window(url: str, arm: str, seed: int, opts: argparse.Namespace, timing: Path | None) -> dict:
    result = loadgen.LevelResult(opts.clients, arm)
    limits = httpx.Limits(max_connections=opts.clients + 4)
    async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(600.0, connect=10.0), limits=limits) as client:
        leftover = await referee.drain(client, url)
        await _set(client, url, {decision.FORCE_KEY: decision.FORCE_CHOICES.index(arm)})
        t0 = time.monotonic()
        span = (t0 + opts.warmup, t0 + opts.warmup + opts.measure)
        plans = [draws(seed * 1000 + k, 10_000, opts.tokens, opts.pause) for k in range(opts.clients)]
        tasks = [asyncio.create_task(_client(client, url, p, result, span)) for p in plans]
        await asyncio.sleep(max(0.0, span[0] - time.monotonic()))
        start, sw0 = await referee.counters(client, url), await _switch_count(client, url)
        await asyncio.sleep(max(0.0, span[1] - time.monotonic()))
        end, sw1 = await referee.counters(client, url), await _switch_count(client, url)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    steps_window = referee.window(start, end)
    switches = sw1 - sw0 if sw0 is not None and sw1 is not None else None
    row = {
        "arm": arm,
        "seed": seed,
        "tok_s": result.tokens / opts.measure,
        "errors": result.errors,
        "error_sample": result.error_sample,
        "drain_s": leftover,
        "switches": switches,
        "steps": steps_window,
        "problem": arm_problem(arm, steps_window, switches),
    }
    if timing is not None and start.steps and end.steps:
        trace = window_steps(_read_trace(timing), sum(start.steps.values()), sum(end.steps.values()))
        row["trace_steps"] = len(trace)
        row["batch_mean"] = statistics.mean(s.batch for s in trace) if trace else None
        row["switch_latency"] = switch_trace.switch_latency(trace)
        row["step_ms"] = switch_trace.step_ms(trace)
    return row


def _read_trace(timing: Path) -> list[list[float]]:
    """The scheduler process's trace (the one process that runs decode batches; its writer
    renames the file atomically every 0.25 s)."""
    for _ in range(20):
        files = sorted(timing.glob("*.trace.json"), key=lambda f: f.stat().st_size)
        try:
            return json.loads(files[-1].read_text())
        except (OSError, ValueError, IndexError):
            time.sleep(0.25)
    raise RuntimeError(f"no readable step trace in {timing}")


def window_steps(rows: list[list[float]], first: int, last: int) -> list[switch_trace.Step]:
    """The trace's steps numbered (first, last] by the patch's step counters."""
    picked = [r for r in rows if first <= r[3] + r[4] <= last]
    return switch_trace.steps(picked)


async def _until(client: httpx.AsyncClient, url: str, mode: str, n: int, deadline: float) -> referee.Counters:
    """Poll the patch's counters until ``mode`` has run ``n`` decode steps in all."""
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{mode} did not reach {n} decode steps before the deadline")
        now = await referee.counters(client, url)
        if now.steps is None:
            raise RuntimeError("the server publishes no step counters")
        if now.steps.get(mode, 0) >= n:
            return now
        await asyncio.sleep(0.2)


async def resume_check(
    url: str, opts: argparse.Namespace, timing: Path, gap: Callable[[], AbstractContextManager[object]] = nullcontext
) -> dict:
    """Forced speculative, target-only, speculative under continuous load (no drain between).
    ``gap`` is entered from the switch to target-only until the switch back has been set
    (benchmarks/warm_draft.py: SGLang skipping the draft's extend there)."""
    result = loadgen.LevelResult(opts.clients, "resume")
    n = opts.resume_steps + 10
    deadline = time.monotonic() + opts.resume_timeout
    async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(600.0, connect=10.0)) as client:
        await referee.drain(client, url)
        await _set(client, url, {decision.FORCE_KEY: decision.FORCE_CHOICES.index(SPEC)})
        start = await referee.counters(client, url)
        plan = [(opts.tokens[1], 0.0)] * 10_000
        span = (time.monotonic(), time.monotonic() + 3600)
        tasks = [asyncio.create_task(_client(client, url, plan, result, span)) for _ in range(opts.clients)]
        try:
            now = await _until(client, url, SPEC, (start.steps or {}).get(SPEC, 0) + n, deadline)
            with gap():
                await _set(client, url, {decision.FORCE_KEY: decision.FORCE_CHOICES.index(TARGET)})
                now = await _until(client, url, TARGET, (now.steps or {})[TARGET] + 60, deadline)
                await _set(client, url, {decision.FORCE_KEY: decision.FORCE_CHOICES.index(SPEC)})
            end = await _until(client, url, SPEC, (now.steps or {})[SPEC] + n, deadline)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0.6)  # the trace file catches up
    trace = window_steps(_read_trace(timing), sum((start.steps or {}).values()), sum((end.steps or {}).values()))
    around = switch_trace.acceptance_around_resume(trace, opts.resume_steps)
    return {"steps": len(trace), "errors": result.errors, "around": around}


def mix_prediction(auto: dict, spec: dict, target: dict) -> float | None:
    """What auto would make if switching cost nothing: each mode's share of auto's decode
    time (the patch's seconds per mode) at that mode's forced tok/s of the same round."""
    win = auto.get("steps") or {}
    steps, ms = win.get("steps"), win.get("ms_per_step_by_mode")
    if not steps or not ms:
        return None
    spent = {m: steps.get(m, 0) * (ms.get(m) or 0.0) for m in (SPEC, TARGET)}
    total = sum(spent.values())
    if not total:
        return None
    return (spent[SPEC] * spec["tok_s"] + spent[TARGET] * target["tok_s"]) / total


def summarise(rounds: list[list[dict]]) -> dict:
    rows = [r for rnd in rounds for r in rnd]
    per_arm = {}
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        per_arm[arm] = {
            "tok_s_runs": [round(r["tok_s"], 1) for r in mine],
            "tok_s_median": statistics.median(r["tok_s"] for r in mine) if mine else None,
            "switches_runs": [r["switches"] for r in mine],
        }
    ratios, mixes, per_step = [], [], []
    for rnd in rounds:
        by = {r["arm"]: r for r in rnd}
        if all("step_ms" in by.get(a, {}) for a in ARMS):
            per_step.append({m: switch_trace.matched_cost(by[AUTO]["step_ms"], by[m]["step_ms"], m) for m in (SPEC, TARGET)})
        best = max(by[SPEC]["tok_s"], by[TARGET]["tok_s"]) if SPEC in by and TARGET in by else 0.0
        ratios.append(by[AUTO]["tok_s"] / best if best and AUTO in by else None)
        mix = mix_prediction(by[AUTO], by[SPEC], by[TARGET]) if best and AUTO in by else None
        mixes.append(by[AUTO]["tok_s"] / mix if mix else None)
    return {
        "per_arm": per_arm,
        "auto_over_best_fixed_per_round": ratios,
        "auto_over_mode_mix_per_round": mixes,
        "auto_step_cost_over_forced_per_round": per_step,
        "problems": [f"round {i} {r['arm']}: {r['problem']}" for i, rnd in enumerate(rounds) for r in rnd if r["problem"]],
        "errors": sum(r["errors"] for r in rows),
    }


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.switch_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="trained", help="the rig pair (trained or deep)")
    p.add_argument("--threshold", type=int, default=4)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--measure", type=float, default=20.0)
    p.add_argument("--tokens", type=lambda t: _pair(t, int), default=(16, 64))
    p.add_argument("--pause", type=_pair, default=(0.0, 0.67), help="pause after a request, a fraction of its duration")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the server (1: steadier on a shared machine)")
    p.add_argument("--resume-timeout", type=float, default=900.0)
    p.add_argument("--resume-steps", type=int, default=200, help="0: skip the acceptance check")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path)
    p.add_argument("--summarise", type=Path, help="summarise a saved --out file again (no server)")
    return p.parse_args(argv)


async def run(url: str, opts: argparse.Namespace, timing: Path, log) -> dict:
    async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
        await _set(
            client,
            url,
            {
                decision.THRESHOLD_KEY: opts.threshold,
                decision.HYSTERESIS_KEY: decision.DEFAULT_HYSTERESIS,
                decision.DWELL_KEY: decision.DEFAULT_MIN_DWELL_STEPS,
            },
        )
    warm = argparse.Namespace(**{**vars(opts), "measure": 3.0})
    for arm in ARMS:  # a cold server streams little in its first window
        await window(url, arm, 999, warm, None)
    rounds = []
    for k in range(opts.rounds):
        done = []
        for arm in loadgen.rotated(list(ARMS), k):
            row = await window(url, arm, k, opts, timing)
            lat = row.get("switch_latency") or {}
            log(
                f"round {k} {arm:>11}: {row['tok_s']:7.1f} tok/s, {row['switches']} switches, batch mean "
                f"{row.get('batch_mean') or 0:.2f}, steps {row['steps'] and row['steps']['steps']}, extra ms per switch "
                + ", ".join(f"{m}: {(lat.get(m) or {}).get('extra_ms_median')}" for m in (SPEC, TARGET))
                + (f"  PROBLEM {row['problem']}" if row["problem"] else "")
            )
            done.append(row)
        rounds.append(done)
    out = summarise(rounds)
    out["rounds"] = rounds
    if opts.resume_steps:
        out["resume"] = await resume_check(url, opts, timing)
        log(f"resume: {out['resume']['around']}")
    return out


def main(argv: list[str] | None = None) -> int:
    opts = options(argv)
    if opts.summarise:  # a saved --out file, summarised again (no server)
        saved = json.loads(opts.summarise.read_text())
        saved.update(summarise(saved["rounds"]))
        print(json.dumps(saved, indent=1) if opts.json else render(saved))
        return 0
    left: list[int] = []
    with rig_run.traced_server(opts.models, SERVER_EXTRA, opts.threads, rig_run.log_line, left) as (server, timing):
        summary = asyncio.run(run(server.url, opts, timing, rig_run.log_line))
    summary.update({"models": opts.models, "threshold": opts.threshold, "processes_left": left})
    return rig_run.finish(summary, opts, render)


def render(summary: dict) -> str:
    lines = ["| arm | tok/s per round | median | switches per round |", "| --- | --- | --- | --- |"]
    for arm, cell in summary["per_arm"].items():
        lines.append(f"| {arm} | {cell['tok_s_runs']} | {cell['tok_s_median']:.1f} | {cell['switches_runs']} |")
    for key in ("auto_over_best_fixed_per_round", "auto_over_mode_mix_per_round"):
        lines.append(f"{key}: {[None if v is None else round(v, 3) for v in summary[key]]}")
    for k, cell in enumerate(summary.get("auto_step_cost_over_forced_per_round") or []):
        lines.append(
            f"round {k}, auto's steps against forced steps of the same mode and batch: "
            + ", ".join(
                f"{m} {c['auto_over_forced']:.3f} over {c['steps_matched']} steps"
                for m, c in cell.items()
                if c["auto_over_forced"]
            )
        )
    lat = [r.get("switch_latency") or {} for rnd in summary["rounds"] for r in rnd if r["arm"] == AUTO]
    for mode in (SPEC, TARGET):
        extra = [x for cell in lat for x in (cell.get(mode) or {}).get("extra_ms", [])]
        if extra:
            lines.append(
                f"first step after a switch to {mode}: {len(extra)} switches, extra ms median "
                f"{statistics.median(extra):.2f} (quartiles {statistics.quantiles(extra, n=4) if len(extra) > 1 else extra})"
            )
    for around in (summary.get("resume") or {}).get("around", []):
        lines.append(f"acceptance around a resume: {around}")
    lines.extend(f"PROBLEM: {p}" for p in summary["problems"])
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
