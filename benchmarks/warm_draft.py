"""What the warm draft costs and what it buys, on one real patched server.

    python -m benchmarks.warm_draft [--models crossover] [--steps 3] [--levels 8,16,32]
                                    [--rounds 3] [--warmup 3] [--measure 10] [--tokens 64]
                                    [--resume-clients 6] [--resumes 2] [--resume-steps 200]
                                    [--threads 2] [--json] [--out FILE]

At every target-only step the patched server still runs the draft's extend over the tokens
the target committed, so that the draft's KV cache is warm when speculation resumes. A
server without it (SGLang's own ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``, which stubs
the extend out at steps 0) would run target-only at plain's cost and resume cold. Both
sides, on the same server (the rig's hook, rig/skip_draft_extend.py, makes SGLang read the
variable as set while a file exists), so no launch's own speed enters a ratio:

* **The price**: closed-loop windows forced target-only at each ``--levels`` concurrency,
  warm and cold alternated (the order rotated each round, the server drained before each
  window), ms per target-only step from the patch's counters; each window's mode share is
  asserted (a step in the other mode is a PROBLEM).
* **The worth**: ``--resumes`` times each, rotated: ``--resume-clients`` clients without
  pauses, 200 speculative steps, 60 target-only (cold: the extend skipped from the switch
  until the switch back is set), 200 speculative; the accept length over the speculative
  steps before and after (benchmarks/switch_cost.py's check, from the per-step trace).

A third variant, ``cold_caught_up``, is the product's cold mode: the patch's cold-draft mark
at 1 for the window (``speculative_disable_cold_draft_above``), so each target-only step
skips the extend and keeps its rows, and one extend catches the draft up whenever 2,048 rows
are kept and before speculation resumes (server_control/sglang_patch/draft_catch_up.py). The
server's ``/server_info`` counters say how many catch-ups ran and how many rows they wrote.

Prints per level each cold variant's step cost over warm's by round and its median, and
the acceptance after / before each resume. Figures go in docs/cpu-rig.md with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from benchmarks import rig_run, switch_cost
from server_control.bench import loadgen
from server_control.protocol import decision

WARM, COLD, CAUGHT_UP = "warm", "cold", "cold_caught_up"
VARIANTS = (WARM, COLD, CAUGHT_UP)
TARGET = decision.TARGET_ONLY


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"want comma-separated concurrencies, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"want concurrencies >= 1, got {text!r}")
    return levels


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.warm_draft", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="crossover", help="the rig pair")
    p.add_argument("--steps", type=int, default=3, help="draft steps (topk 1)")
    p.add_argument("--levels", type=_levels, default=[8, 16, 32])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--measure", type=float, default=10.0)
    p.add_argument("--tokens", type=int, default=64, help="every request's length")
    p.add_argument("--resume-clients", type=int, default=6)
    p.add_argument("--resumes", type=int, default=2, help="resume checks per variant (0: none)")
    p.add_argument("--resume-steps", type=int, default=200)
    p.add_argument("--resume-timeout", type=float, default=900.0)
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of the server")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path)
    opts = p.parse_args(argv)
    if opts.rounds < 1 or opts.tokens < 1 or opts.resumes < 0 or opts.resume_steps < 1:
        p.error("--rounds, --tokens and --resume-steps must be >= 1, --resumes >= 0")
    return opts


def _window_opts(opts: argparse.Namespace, clients: int, measure: float | None = None) -> argparse.Namespace:
    """switch_cost.window's options for a closed loop of ``clients`` without pauses."""
    return argparse.Namespace(
        clients=clients,
        warmup=opts.warmup,
        measure=opts.measure if measure is None else measure,
        tokens=(opts.tokens, opts.tokens),
        pause=(0.0, 0.0),
    )


def step_ms(row: dict) -> float | None:
    """A window's ms per target-only step, from the patch's counters."""
    by_mode = (row.get("steps") or {}).get("ms_per_step_by_mode") or {}
    ms = by_mode.get(TARGET)
    return float(ms) if ms else None


def summarise(windows: list[dict], resumes: list[dict]) -> dict:
    """Per level: each variant's ms per step by round, cold / warm by round and its median;
    per resume: the accept length before and after."""
    levels: dict[str, dict] = {}
    for c in sorted({w["clients"] for w in windows}):
        mine = [w for w in windows if w["clients"] == c]
        rounds = sorted({w["round"] for w in mine})
        ms = {v: [step_ms(w) for r in rounds for w in mine if w["round"] == r and w["variant"] == v] for v in VARIANTS}
        by_round = {(w["round"], w["variant"]): step_ms(w) for w in mine}
        levels[str(c)] = {
            "ms_per_step_runs": ms,
            "tok_s_runs": {v: [round(w["tok_s"], 1) for w in mine if w["variant"] == v] for v in VARIANTS},
        }
        for v in (COLD, CAUGHT_UP):  # each against the warm window of its own round
            pairs = [(by_round.get((r, WARM)), by_round.get((r, v))) for r in rounds]
            ratios = [x / warm for warm, x in pairs if warm and x]
            levels[str(c)][f"{v}_over_warm_by_round"] = ratios
            levels[str(c)][f"{v}_over_warm_median"] = statistics.median(ratios) if ratios else None
    after_over_before: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for res in resumes:
        for around in res["around"]:
            if around["before"] and around["after"] is not None:
                after_over_before[res["variant"]].append(around["after"] / around["before"])
    problems = [f"round {w['round']} c={w['clients']} {w['variant']}: {w['problem']}" for w in windows if w["problem"]]
    problems += [f"resume {r['variant']}: no resume found in the trace" for r in resumes if not r["around"]]
    return {
        "levels": levels,
        "resumes": resumes,
        "accept_after_over_before": after_over_before,
        "problems": problems,
        "errors": sum(w["errors"] for w in windows) + sum(r["errors"] for r in resumes),
    }


async def _mark(url: str, variant: str) -> None:
    """The patch's cold-draft mark for the variant's window: 1 for cold_caught_up, else 0."""
    if not await loadgen.set_setting(url, decision.COLD_DRAFT_KEY, 1 if variant == CAUGHT_UP else 0):
        raise RuntimeError(f"the server refused {decision.COLD_DRAFT_KEY} for {variant}")


async def run(url: str, opts: argparse.Namespace, timing: Path, cold: Callable[[], AbstractContextManager[object]], log) -> dict:
    def gap(variant: str) -> AbstractContextManager[object]:
        return cold() if variant == COLD else nullcontext()

    for variant in VARIANTS:  # a fresh server streams little in its first windows
        await _mark(url, variant)
        with gap(variant):
            await switch_cost.window(url, TARGET, 999, _window_opts(opts, opts.levels[0], measure=3.0), None)
    windows = []
    for k in range(opts.rounds):
        for c in loadgen.rotated(opts.levels, k):
            for variant in loadgen.rotated(list(VARIANTS), k):
                await _mark(url, variant)
                with gap(variant):
                    row = await switch_cost.window(url, TARGET, k, _window_opts(opts, c), None)
                row.update(round=k, clients=c, variant=variant)
                windows.append(row)
                log(
                    f"round {k} c={c:>3} {variant}: {row['tok_s']:6.1f} tok/s, {step_ms(row) or 0:6.1f} ms a target-only step"
                    + (f"  PROBLEM {row['problem']}" if row["problem"] else "")
                )
    resumes = []
    check = argparse.Namespace(
        clients=opts.resume_clients,
        tokens=(opts.tokens, opts.tokens),
        resume_steps=opts.resume_steps,
        resume_timeout=opts.resume_timeout,
    )
    for k in range(opts.resumes):
        for variant in loadgen.rotated(list(VARIANTS), k):
            await _mark(url, variant)
            res = await switch_cost.resume_check(url, check, timing, gap=functools.partial(gap, variant))
            res["variant"] = variant
            resumes.append(res)
            log(f"resume {k} {variant}: {res['around']}")
    await _mark(url, WARM)
    return summarise(windows, resumes) | {"windows": windows, "catch_up": await _catch_up_counts(url)}


async def _catch_up_counts(url: str) -> dict | None:
    """The server's catch-up counters (``/server_info``), None where it does not say."""
    import httpx

    async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
        resp = await client.get(url + "/server_info")
    states = resp.json().get("internal_states") if resp.status_code == 200 else None
    for state in states or []:
        snap = state.get("dynamic_speculation") if isinstance(state, dict) else None
        if isinstance(snap, dict) and "catch_up" in snap:
            return snap["catch_up"]
    return None


def render(summary: dict) -> str:
    lines = [
        "| c | warm ms a step | cold | cold, caught up | cold / warm by round (median) | caught up / warm (median) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    fmt = lambda xs: ", ".join("-" if x is None else f"{x:.1f}" for x in xs)  # noqa: E731
    for c, cell in summary["levels"].items():
        runs = cell["ms_per_step_runs"]
        cols = []
        for v in (COLD, CAUGHT_UP):
            med = cell[f"{v}_over_warm_median"]
            by_round = ", ".join(f"{r:.3f}" for r in cell[f"{v}_over_warm_by_round"])
            cols.append(by_round + f" ({'-' if med is None else f'{med:.3f}'})")
        lines.append(f"| {c} | {fmt(runs[WARM])} | {fmt(runs[COLD])} | {fmt(runs[CAUGHT_UP])} | {cols[0]} | {cols[1]} |")
    for variant, ratios in summary["accept_after_over_before"].items():
        lines.append(f"accept length after / before a resume, {variant}: {[round(r, 3) for r in ratios]}")
    lines.append(f"catch-up counters: {summary.get('catch_up')}")
    lines.append(f"failed requests: {summary['errors']}")
    lines.extend(f"PROBLEM: {p}" for p in summary["problems"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    opts = options(argv)
    extra = ("--max-running-requests", "128", "--max-total-tokens", "16384", "--enable-metrics", "--decode-log-interval", "40")
    left: list[int] = []
    log = rig_run.log_line
    with rig_run.traced_server(opts.models, extra, opts.threads, log, left, steps=opts.steps) as (server, timing):
        summary = asyncio.run(run(server.url, opts, timing, server.skipping_draft_extend, log))
    summary.update({"models": opts.models, "steps": opts.steps, "processes_left": left})
    return rig_run.finish(summary, opts, render)


if __name__ == "__main__":
    sys.exit(main())
