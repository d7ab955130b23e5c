"""`specconsole bench`: concurrency sweep per mode against a server's OpenAI API.

For each concurrency level, `--rounds` rounds in which every mode (speculative,
target-only: forced through /set_internal_state; auto) runs one window, the order rotated
each round; before each window the server is drained (no running or waiting request left
over). Closed-loop streaming clients run for a warm-up and a measuring window; each cell is
the median of its rounds (every round is in --json). The table shows tok/s per mode, the
server's milliseconds per decode step (its own decode-pass counter, `--enable-metrics`)
and the crossover (the first level where target-only wins), i.e. the threshold to set.
With the patch's counters (`/server_info`) each forced window is checked: a window whose
steps did not all run in the forced mode fails the run (exit 1). With the patch's metrics
each level also shows the share of decode steps that ran target-only, switches, and the
accept length over speculative steps.
`--sim` benchmarks a freshly started simulator (with metrics) instead of a URL.

Exit codes: 0 measured; 1 the server failed (unreachable, errors, refused to force a mode);
2 bad arguments; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from console.cli.common import EXIT_FAILED, EXIT_OK, add_key_env_arguments, error
from server_control.protocol import decision
from server_control.protocol.arg_types import positive_seconds


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels must be comma-separated integers, got {text!r}") from None
    if not levels or levels[0] < 1 or levels[-1] > 4096:
        raise argparse.ArgumentTypeError(f"levels must be between 1 and 4096, got {text!r}")
    return levels


def _rounds(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 50:
        raise argparse.ArgumentTypeError(f"rounds must be an integer from 1 to 50, got {text!r}")
    return n


def _modes(text: str) -> list[str]:
    modes = []
    for part in text.split(","):
        try:
            modes.append(decision.validate_force(part))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return modes


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="concurrency sweep: per-mode throughput and the crossover",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="server to measure, e.g. http://127.0.0.1:30000")
    target.add_argument("--sim", action="store_true", help="start a simulator (tp 2, threshold 5) and measure it")
    p.add_argument("--levels", type=_levels, default=[1, 2, 4, 8, 16, 32], help="concurrencies (default 1,2,4,8,16,32)")
    p.add_argument(
        "--modes",
        type=_modes,
        default=[decision.SPECULATIVE, decision.TARGET_ONLY],
        help="modes to force, comma-separated (default speculative,target_only; auto = as configured)",
    )
    p.add_argument("--warmup", type=positive_seconds, default=3.0, help="seconds before measuring (default 3)")
    p.add_argument("--measure", type=positive_seconds, default=10.0, help="measuring window in seconds (default 10)")
    p.add_argument("--max-tokens", type=int, default=256, help="tokens per request (default 256)")
    p.add_argument(
        "--rounds", type=_rounds, default=2, help="rounds of every mode per level, order rotated; cells are medians (default 2)"
    )
    add_key_env_arguments(p)
    p.add_argument(
        "--sim-time-scale",
        type=positive_seconds,
        default=1.0,
        help="with --sim: simulated seconds per second; figures are reported in simulated time",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def render(result: dict) -> str:
    per_mode = result["per_mode"]
    modes = list(per_mode)
    lines = ["concurrency  " + "  ".join(f"{m:>24}" for m in modes) + "  best"]
    for i, c in enumerate(result["levels"]):
        rows = [per_mode[m][i] if i < len(per_mode[m]) else None for m in modes]
        values = [r["tok_s"] if r else None for r in rows]
        best = modes[max(range(len(modes)), key=lambda k: values[k] or 0)] if values else ""
        cells = "  ".join(_cell(r) for r in rows)
        lines.append(f"{c:>11}  {cells}  {best}")
    lines.append(f"tok/s (ms per decode step, the server's own counter); median of {result.get('rounds', 1)} interleaved rounds")
    errors = sum(r["errors"] for rows in per_mode.values() for r in rows)
    if result["crossover"] is None:
        lines.append("crossover: none in the measured range (speculation never lost)")
    else:
        lines.append(
            f"crossover: target-only wins from concurrency {result['crossover']}; "
            f"suggested --speculative-disable-batch-threshold {result['suggested_threshold']}"
        )
    if errors:
        lines.append(f"errors: {errors} failed requests")
    lines.extend(f"PROBLEM: {p}" for p in result.get("problems", []))
    lines.extend(_server_lines(per_mode))
    lines.extend(f"note: {n}" for n in result["notes"])
    return "\n".join(lines)


def _cell(row: dict | None) -> str:
    if row is None:
        return f"{'-':>24}"
    ms = row.get("ms_per_step")
    return f"{row['tok_s']:>10.1f} tok/s" + (f" ({ms:6.2f} ms)" if ms is not None else " " * 10)


def _server_lines(per_mode: dict) -> list[str]:
    """What the server said it did in each window (the patch's metrics), where it did."""
    lines = []
    for mode, rows in per_mode.items():
        for r in rows:
            srv = r.get("server")
            if not srv:
                continue
            share, acc = srv["target_only_share"], srv["accept_length"]
            lines.append(
                f"server c={r['concurrency']} {mode}: "
                + (f"{share:.0%} of decode steps target-only" if share is not None else "no decode step")
                + f", {srv['switches']:.0f} switches"
                + (f", accept length {acc:.2f} over speculative steps" if acc is not None else "")
            )
    if lines:
        lines.insert(0, "server (/metrics, sglang:spec_disable_*):")
    return lines


async def _measure(args, url: str) -> dict:
    from server_control.bench import loadgen

    return await loadgen.sweep(
        url,
        args.levels,
        modes=args.modes,
        warmup_s=args.warmup,
        measure_s=args.measure,
        max_tokens=args.max_tokens,
        rounds=args.rounds,
        api_key=os.environ.get(args.api_key_env) or None,
        admin_api_key=os.environ.get(args.admin_api_key_env) or None,
        progress=None if args.json else _progress,
    )


def _progress(r) -> None:
    print(f"  {r.mode:>12} c={r.concurrency:<4} {r.tok_s:9.1f} tok/s  errors={r.errors}", file=sys.stderr)


def run(args) -> int:
    from server_control.net.lean_httpx import httpx

    scale = 1.0
    try:
        if args.sim:
            from server_control.proc.sim_launcher import start_sim

            scale = args.sim_time_scale
            budget = len(args.levels) * len(args.modes) * args.rounds * (args.warmup + args.measure + 5) + 120
            with start_sim("--enable-metrics", tp=2, threshold=5, time_scale=scale, lifetime=budget) as sim:
                sim.wait_ready()
                result = asyncio.run(_measure(args, sim.url))
        else:
            result = asyncio.run(_measure(args, args.url))
    except (httpx.HTTPError, OSError, RuntimeError, TimeoutError) as exc:
        error(f"benchmark failed: {type(exc).__name__}: {exc}", "error")
        return EXIT_FAILED
    if scale != 1.0:
        for rows in result["per_mode"].values():
            for r in rows:
                r["tok_s"] = round(r["tok_s"] / scale, 2)
        result["notes"].append(f"simulator at time scale {scale:g}: tok/s in simulated seconds")
    print(json.dumps(result, indent=2) if args.json else render(result))
    failed = any(r["tokens"] == 0 for rows in result["per_mode"].values() for r in rows)
    refused = any("refused" in n for n in result["notes"])
    return EXIT_FAILED if failed or refused or result.get("problems") else EXIT_OK
