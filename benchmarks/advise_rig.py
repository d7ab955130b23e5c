"""The advisor against ``mode_cost`` on the real CPU rig (issue 21's last goal).

    python -m benchmarks.advise_rig [--models trained] [--levels 2,4,6,8,10] [--threshold N]
                                    [--share 0.1] [--explore-s 180] [--hold 4] [--rounds 3]
                                    [--warmup 2] [--measure 6] [--max-tokens 64] [--threads 1] [--cold M]
                                    [--url URL] [--json] [--out FILE] [--summarise FILE]

One patched server (tests/real_sglang/rig, ``--enable-metrics``; ``--url``: a running one),
two phases on it:

phase 1  the advisor. Threshold N (default the middle level), force auto, the default
         hysteresis and dwell, exploration share ``--share`` set at runtime
         (``speculative_disable_explore_share``). Closed-loop clients whose number walks
         a triangle over every concurrency from the lowest level to the highest, ``--hold``
         seconds each, for ``--explore-s`` seconds: the decode batch spans N, and batches
         within ``explore.window(N)`` of N run the other mode now and then. Then the
         advisor's reading from the server's own curves, the same calls as
         ``specconsole advise --json`` on a fresh state dir: ``read_server``, ``estimate``,
         ``advise`` (a reading every 60 s on the way, printed on stderr).
phase 2  ``mode_cost``'s forced speculative against forced target-only at the same levels
         (``interleave.interleaved``: ``--rounds`` rounds, the order rotated, drained before
         each window, each window's mode share asserted from the patch's counters), and its
         crossover: the smallest level at which target-only out-produced speculation
         (client tok/s, median of the rounds). Exploration is set to 0 first (it acts in auto
         only). The advisor is also read on phase 2's own steps (the curves' difference), a
         check of the estimate on dense data in both modes.

``--cold M`` sets the cold-draft mark M for phase 1 (a target-only stretch above M skips the
draft's extend; explored target-only steps, amid speculative ones, stay warm), and phase 2's
forced target-only runs with the draft cold (mark 1): its crossover is then the one against
the cold mode, which the advisor's phase-1 curves (warm explored steps near N) may miss.

Agreement (``agreement``): mode_cost's crossover at level L says the true one lies in
(previous level, L]; the advisor agrees when its crossover batch lies in that bracket or
one curve bucket beside it. Without a crossover in mode_cost (speculation won at every
level up to the top T), the advisor agrees when it finds none either (verdict
``speculation_wins``, N=0 "never disable") or puts target-only's first win at T or beyond.
Exit 1 on a problem (a mode share, a failed request, a process left) or a disagreement.
Figures go in docs/advice.md with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import interleave, mode_cost
from benchmarks.triangle_traffic import triangle, walk_triangle
from server_control.advice.source import Reading, read_server
from server_control.advice.words import Advice, advise
from server_control.bench import loadgen
from server_control.protocol import decision, explore
from server_control.protocol.cost_curves import bucket_index
from server_control.protocol.crossover import estimate

SPEC, TARGET, AUTO = decision.SPECULATIVE, decision.TARGET_ONLY, decision.AUTO


@dataclass(frozen=True)
class Agreement:
    agree: bool
    measured: int | None  # mode_cost: the smallest level where target-only won (None: none)
    bracket: tuple[int, int] | None  # the batches the measured crossover lies in
    advised: int | None  # the advisor's first batch where target-only wins (None: none)
    suggested: int | None  # the advisor's N (0: never disable; None: not enough data)
    reason: str


def agreement(levels: Sequence[int], measured: int | None, advised: int | None, suggested: int | None) -> Agreement:
    """Does the advisor's crossover (``advised``, the first batch where target-only wins,
    None when it finds speculation faster everywhere; ``suggested`` None when it had not
    enough data) agree within one curve bucket with mode_cost's (``measured``: the
    smallest of ``levels`` where target-only won, None when it never did)?"""
    levels = sorted(set(levels))
    if not levels:
        raise ValueError("no levels")
    if measured is not None and measured not in levels:
        raise ValueError(f"mode_cost's crossover {measured} is not one of the levels {levels}")
    if suggested is None:
        return Agreement(False, measured, None, advised, suggested, "the advisor had not enough data to suggest an N")
    said = "none (speculation faster everywhere)" if advised is None else f"target-only from batch {advised}"
    if measured is None:
        top = levels[-1]
        ok = advised is None or bucket_index(advised) >= bucket_index(top)
        why = f"mode_cost: speculation won at every level up to {top}; advisor: {said} (N={suggested}): " + (
            "agrees, N is not limiting within the levels" if ok else f"disagrees, target-only would win below {top}"
        )
        return Agreement(ok, None, None, advised, suggested, why)
    below = [c for c in levels if c < measured]
    lo, hi = (below[-1] + 1 if below else 1), measured
    ok = advised is not None and bucket_index(lo) - 1 <= bucket_index(advised) <= bucket_index(hi) + 1
    where = f"batch {lo}" if lo == hi else f"batches {lo}-{hi}"
    why = f"mode_cost: target-only wins from level {measured} (crossover in {where}); advisor: {said} (N={suggested}): " + (
        "within one bucket" if ok else "not within one bucket"
    )
    return Agreement(ok, measured, (lo, hi), advised, suggested, why)


async def _set(client: httpx.AsyncClient, url: str, values: dict[str, Any]) -> bool:
    """True when every rank took ``values`` (SGLang answers a list of booleans)."""
    resp = await client.post(url + "/set_internal_state", json={"server_args": values})
    try:
        body = resp.json() if resp.status_code == 200 else None
    except ValueError:
        return False
    return isinstance(body, list) and bool(body) and all(x is True for x in body)


def _exploration(reading_info: dict[str, Any]) -> dict[str, Any] | None:
    states = reading_info.get("internal_states") or []
    live = states[0].get(decision.STATE_KEY) if states and isinstance(states[0], dict) else None
    return live.get(explore.SNAPSHOT_KEY) if isinstance(live, dict) else None


async def _exploration_state(client: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    return _exploration((await client.get(url + "/server_info", timeout=10.0)).json())


async def prepare(url: str, threshold: int, share: float, cold: int = 0) -> dict[str, Any]:
    """Threshold, hysteresis, dwell, force auto, the cold-draft mark (``cold``; 0 on a server
    that has none is not sent) and the exploration share, set at runtime (a server that
    refuses the share key must already run at that share: a simulator started with
    ``--sim-explore-share``)."""
    async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
        wanted = {
            decision.THRESHOLD_KEY: threshold,
            decision.HYSTERESIS_KEY: decision.DEFAULT_HYSTERESIS,
            decision.DWELL_KEY: decision.DEFAULT_MIN_DWELL_STEPS,
            **({decision.COLD_DRAFT_KEY: cold} if cold else {}),
        }
        if not await _set(client, url, wanted):
            raise RuntimeError(f"the server refused {wanted}")
        if not await loadgen.set_force(url, AUTO):
            raise RuntimeError("the server refused force auto")
        runtime = await _set(client, url, {explore.SHARE_KEY: share})
        state = await _exploration_state(client, url)
    if state is None or abs(float(state.get("share", -1)) - share) > 1e-9:
        raise RuntimeError(f"exploration share {share} not in effect (set at runtime: {runtime}; the server says {state})")
    return {"share_set_at_runtime": runtime, "exploration": state}


async def _read(url: str) -> tuple[Reading, Advice]:
    """What ``specconsole advise --json`` computes on a fresh state dir."""
    reading = await asyncio.to_thread(read_server, url, None, 10.0)
    return reading, await asyncio.to_thread(lambda: advise(estimate(reading.curves), reading.threshold))


def _brief(adv: Advice) -> dict[str, Any]:
    doc = adv.to_json()
    return {k: doc[k] for k in ("current", "suggested", "interval", "crossover", "verdict", "sentence", "confident")}


async def explore_phase(url: str, opts: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """Closed-loop clients walking a triangle over the levels' range under auto with
    exploration; the advisor read every ``opts.read_every`` seconds and at the end."""
    schedule = triangle(min(opts.levels), max(opts.levels))
    readings: list[dict[str, Any]] = []

    async def read(elapsed: float) -> None:
        _reading, adv = await _read(url)
        row = {"at_s": round(elapsed), **_brief(adv)}
        readings.append(row)
        log(f"phase 1 at {row['at_s']} s: {adv.sentence}")

    result = await walk_triangle(url, schedule, opts.hold, opts.explore_s, opts.max_tokens, opts.read_every, read)
    async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
        explored = await _exploration_state(client, url)
    reading, adv = await _read(url)
    log(f"phase 1 at {opts.explore_s:.0f} s (the reading): {adv.sentence}")
    return {
        "schedule": schedule,
        "tokens": result.tokens,
        "tok_s": result.tokens / opts.explore_s,
        "errors": result.errors,
        "error_sample": result.error_sample,
        "exploration": explored,
        "readings": readings,
        "advice": adv.to_json(),
        "_reading": reading,
    }


async def run(url: str, opts: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    setup = await prepare(url, opts.threshold, opts.share, opts.cold)
    log(
        f"phase 1: N={opts.threshold}, cold-draft mark {opts.cold}, exploration {setup['exploration']}, "
        f"clients {min(opts.levels)}-{max(opts.levels)}"
    )
    p1 = await explore_phase(url, opts, log)
    before: Reading = p1.pop("_reading")
    if opts.out:  # phase 1 kept even if phase 2 fails
        opts.out.write_text(json.dumps({"setup": setup, "phase1": p1}, indent=1, default=str))
    async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
        if not await _set(client, url, {explore.SHARE_KEY: 0.0}) and setup["share_set_at_runtime"]:
            raise RuntimeError("the server refused exploration share 0")
    # with --cold, phase 2's target-only runs with the draft cold (mark 1: every step of it),
    # the mode auto runs above N with the mark; each window's cold steps checked by the counters
    cold = (0, 1) if opts.cold else (None, None)
    arms = [interleave.Arm(SPEC, url, SPEC, cold=cold[0]), interleave.Arm(TARGET, url, TARGET, cold=cold[1])]
    result = await interleave.interleaved(arms, opts, None, log)
    p2 = mode_cost.summarise(result, opts.levels)
    after = await asyncio.to_thread(read_server, url, None, 10.0)
    p2_advice = await asyncio.to_thread(lambda: advise(estimate(after.curves.minus(before.curves)), after.threshold))
    e = p1["advice"]
    verdict = agreement(opts.levels, p2["crossover"], e["crossover"], e["suggested"])
    return {"setup": setup, "phase1": p1, "phase2": p2, "phase2_advice": p2_advice.to_json(), "agreement": asdict(verdict)}


def _f(v: float | None, fmt: str = ".1f") -> str:
    return "-" if v is None else format(v, fmt)


def render(out: dict[str, Any]) -> str:
    p1, p2, agree = out["phase1"], out["phase2"], out["agreement"]
    adv = p1["advice"]
    lines = [
        f"{out.get('models')}, threshold N={out['threshold']}, cold-draft mark {out.get('cold', 0)}, "
        f"exploration share {out['share']}, "
        f"load average {' '.join(f'{x:.2f}' for x in out['load_start'])} -> {' '.join(f'{x:.2f}' for x in out['load_end'])}",
        f"phase 1: {out['explore_s']:.0f} s of clients {p1['schedule'][0]}-{max(p1['schedule'])} "
        f"({p1['tok_s']:.1f} tok/s, {p1['errors']} failed), explored steps {(p1['exploration'] or {}).get('explored_steps')}",
        "   batch   speculative tok/s (steps)   target-only tok/s (steps)",
    ]
    by: dict[tuple[int, int], dict[str, dict]] = {}
    for p in adv["curves"]:
        by.setdefault((p["lo"], p["hi"]), {})[p["mode"]] = p
    for (lo, hi), row in sorted(by.items()):
        cells = [
            f"{row[m]['tok_s']:8.1f} ± {row[m]['tok_s_se']:5.1f} ({row[m]['steps']:4d})" if m in row else f"{'-':>24}"
            for m in (SPEC, TARGET)
        ]
        lines.append(f"{(str(hi) if lo == hi else f'{lo}-{hi}'):>8}   {cells[0]}   {cells[1]}")
    for r in p1["readings"]:
        lines.append(f"advisor at {r['at_s']} s: N={r['suggested']}, interval {r['interval']}: {r['sentence']}")
    lines.append(
        f"advisor: verdict {adv['verdict']}, crossover {adv['crossover']}, N={adv['suggested']}, "
        f"interval {adv['interval']}: {adv['sentence']}"
    )
    lines.append("phase 2 (mode_cost, forced, client tok/s median of the rounds (ms per decode step)):")
    lines.append("| c | speculative | target-only | runs speculative | runs target-only |")
    lines.append("| --- | --- | --- | --- | --- |")
    for r in p2["rows"]:
        runs = r["tok_s_runs"]
        lines.append(
            f"| {r['concurrency']} | {_f(r['tok_s'][SPEC])} ({_f(r['ms_per_step'][SPEC], '.1f')} ms) | "
            f"{_f(r['tok_s'][TARGET])} ({_f(r['ms_per_step'][TARGET], '.1f')} ms) | "
            f"{[round(x, 1) for x in runs.get(SPEC, [])]} | {[round(x, 1) for x in runs.get(TARGET, [])]} |"
        )
    cross = p2["crossover"]
    lines.append(f"mode_cost crossover: {f'target-only wins from c={cross}' if cross else 'none within the levels'}")
    a2 = out["phase2_advice"]
    lines.append(f"advisor on phase 2's forced steps: crossover {a2['crossover']}, N={a2['suggested']}: {a2['sentence']}")
    lines.append(("AGREE: " if agree["agree"] else "DISAGREE: ") + agree["reason"])
    lines.extend(f"PROBLEM: {p}" for p in out["problems"])
    return "\n".join(lines)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.advise_rig", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="trained", help="the rig pair: trained, deep or crossover")
    p.add_argument("--steps", type=int, default=2, help="draft steps (default 2)")
    p.add_argument("--max-total-tokens", type=int, default=8192, help="the server's KV pool (default 8192)")
    p.add_argument("--max-running-requests", type=int, help="the server's running cap (default SGLang's)")
    p.add_argument("--levels", type=mode_cost._levels, default=[2, 4, 6, 8, 10])
    p.add_argument("--threshold", type=int, help="N in phase 1 (default: the middle level)")
    p.add_argument("--share", type=explore.validate_share, default=0.1, help="exploration share in phase 1")
    p.add_argument("--explore-s", type=float, default=180.0, help="phase 1's length")
    p.add_argument("--hold", type=float, default=4.0, help="seconds at each client count in phase 1")
    p.add_argument("--read-every", type=float, default=60.0, help="an advisor reading every S s of phase 1")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--measure", type=float, default=6.0)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the server")
    p.add_argument(
        "--cold",
        type=int,
        default=0,
        help="the cold-draft mark M in phase 1 (0: warm); phase 2's target-only then runs cold (mark 1)",
    )
    p.add_argument("--url", help="a running patched server (else one is started)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path)
    p.add_argument("--summarise", type=Path, help="print a saved --out file again (no server)")
    opts = p.parse_args(argv)
    if opts.threshold is None:
        opts.threshold = opts.levels[len(opts.levels) // 2]
    if not opts.levels or opts.threshold < 1:
        p.error("want levels and a threshold >= 1")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = options(argv)
    if opts.summarise:
        print(render(json.loads(opts.summarise.read_text())))
        return 0

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    load_start = os.getloadavg()
    left: list[Any] = []
    if opts.url:
        out = asyncio.run(run(opts.url.rstrip("/"), opts, log))
    else:
        from tests.real_sglang.rig.build import ensure_rig
        from tests.real_sglang.rig.pool import Spec, launch

        with tempfile.TemporaryDirectory(prefix="advise-rig-") as tmp:
            env = {"OMP_NUM_THREADS": str(opts.threads)}
            extra: tuple[str, ...] = (
                *mode_cost.SERVER_EXTRA,
                "--max-total-tokens",
                str(opts.max_total_tokens),
            )  # the last one counts
            if opts.max_running_requests:
                extra += ("--max-running-requests", str(opts.max_running_requests))
            server = launch(ensure_rig(), Spec(opts.models, extra=extra, steps=opts.steps), Path(tmp), 7200, env)
            try:
                log(f"{opts.models} patched server ready in {server.wait_ready(timeout_s=1200):.0f} s")
                out = asyncio.run(run(server.url, opts, log))
            finally:
                left = server.stop()
    p1, p2 = out["phase1"], out["phase2"]
    problems = list(p2["problems"]) + (
        [f"phase 1: {p1['errors']} failed requests ({p1['error_sample']})"] if p1["errors"] else []
    )
    problems += [f"phase 2: {p2['errors']} failed requests"] if p2["errors"] else []
    problems += [f"processes left: {left}"] if left else []
    out.update(
        models=f"the server at {opts.url}" if opts.url else f"the {opts.models} pair",
        threshold=opts.threshold,
        cold=opts.cold,
        share=opts.share,
        explore_s=opts.explore_s,
        levels=opts.levels,
        load_start=load_start,
        load_end=os.getloadavg(),
        problems=problems,
        processes_left=left,
    )
    if opts.out:
        opts.out.write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out, indent=1, default=str) if opts.json else render(out))
    return 0 if not problems and out["agreement"]["agree"] else 1


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
