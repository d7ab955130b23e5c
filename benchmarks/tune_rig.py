"""The in-server tuner on the real crossover pair, started from wrong Ns (issue 31's goal).

    python -m benchmarks.tune_rig [--models crossover] [--steps 3] [--starts 2,48]
                                  [--seconds 600] [--clients 4-28] [--hold 4]
                                  [--bounds 1-64] [--target 8-16] [--every 10]
                                  [--max-running-requests 128] [--max-total-tokens 16384]
                                  [--json] [--out FILE]

One patched server (tests/real_sglang/rig) started with ``--speculative-disable-auto-tune
BOUNDS`` (exploration at the tuner's default share). For each start N in ``--starts``, in
turn on the same server: N is set at runtime (which turns tuning off, as an operator's N
does), tuning is turned on again at runtime, and closed-loop clients walk a triangle over
``--clients`` (``--hold`` s at each count: the decode batch spans the crossover) for
``--seconds``. The server's threshold and its tuner's state are read from ``/server_info``
every ``--every`` s; its own move lines are read from its log at the end.

Per start: the N trajectory, the first time N lay in ``--target`` (the Ns within one curve
bucket of the crossover measured by ``mode_cost``: on the crossover pair target-only wins
from c=16 and loses at c=8, so the best N lies in 8-15, and 7-16 within one bucket; the
default 8-16 is that, less the bucket below 8 that a closed loop at 8 would cross), the
reversals (moves against the direction of the one before), and the final N. Goals (issue
31): within the target in <= 10 minutes from each start, <= 2 reversals per 30 minutes.
Exit 1 on a failed request, a process left, or a start that never reached the target.
Figures go in docs/cpu-rig.md with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import mode_cost
from benchmarks.advise_rig import _set
from benchmarks.triangle_traffic import triangle, walk_triangle
from server_control.protocol import decision
from server_control.protocol.tuner import AUTO_TUNE_KEY, MOVE_PREFIX, parse_bounds

# one rank's moves: TP0's at tp > 1, the only rank's (no TP in its prefix) at tp 1
MOVE_LINE = re.compile(r"^\[(?![^\]]* TP[1-9])[^\]]*\] (" + re.escape(MOVE_PREFIX) + r"(\d+) -> (\d+) \(auto: .*\))$", re.M)


def _range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    try:
        a, b = int(lo), int(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want LO-HI integers, got {text!r}") from None
    if not 1 <= a <= b:
        raise argparse.ArgumentTypeError(f"want 1 <= LO <= HI, got {text!r}")
    return a, b


async def live_state(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    (state,) = (await client.get(url + "/server_info", timeout=10.0)).json()["internal_states"][:1]
    live = state[decision.STATE_KEY]
    return {"threshold": live["threshold"], "auto_tune": live.get("auto_tune") or {}}


def reversals(ns: list[int]) -> int:
    """Moves against the direction of the move before (over the distinct successive Ns)."""
    steps = [b - a for a, b in zip(ns, ns[1:], strict=False) if b != a]
    return sum(1 for a, b in zip(steps, steps[1:], strict=False) if (a > 0) != (b > 0))


def summarise_start(start: int, rows: list[dict[str, Any]], target: tuple[int, int]) -> dict[str, Any]:
    ns = [start] + [r["threshold"] for r in rows]
    reached = next((r["at_s"] for r in rows if target[0] <= r["threshold"] <= target[1]), None)
    return {
        "start": start,
        "reached_target_s": reached,
        "reversals": reversals(ns),
        "final": ns[-1],
        "distinct": [n for i, n in enumerate(ns) if i == 0 or n != ns[i - 1]],
    }


async def run_start(url: str, start: int, opts: argparse.Namespace, log) -> dict[str, Any]:
    async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
        if not await _set(client, url, {decision.THRESHOLD_KEY: start}):
            raise RuntimeError(f"the server refused threshold {start}")
        if not await _set(client, url, {AUTO_TUNE_KEY: 1}):
            raise RuntimeError("the server refused auto-tune on")
        state = await live_state(client, url)
        if state["threshold"] != start or not state["auto_tune"].get("on"):
            raise RuntimeError(f"not started at N={start} with tuning on: {state}")
        rows: list[dict[str, Any]] = []

        async def read(elapsed: float) -> None:
            s = await live_state(client, url)
            rows.append({"at_s": round(elapsed), "threshold": s["threshold"], "moves": s["auto_tune"].get("moves")})
            log(f"start {start}: at {elapsed:.0f} s N={s['threshold']} (moves {s['auto_tune'].get('moves')})")

        lo, hi = opts.clients
        result = await walk_triangle(url, triangle(lo, hi), opts.hold, opts.seconds, opts.max_tokens, opts.every, read)
        await read(opts.seconds)
    out = summarise_start(start, rows, opts.target)
    out.update(rows=rows, tokens=result.tokens, tok_s=result.tokens / opts.seconds, errors=result.errors)
    out["error_sample"] = result.error_sample
    return out


def render(out: dict[str, Any]) -> str:
    lines = [
        f"{out['models']}, steps {out['steps']}, auto-tune {out['bounds']}, clients {out['clients']}, "
        f"target N {out['target']}, {out['seconds']:.0f} s a start, load average "
        f"{' '.join(f'{x:.2f}' for x in out['load_start'])} -> {' '.join(f'{x:.2f}' for x in out['load_end'])}",
        "| start N | N over time | reached target | reversals | final N | tok/s | failed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in out["starts"]:
        reached = "never" if s["reached_target_s"] is None else f"{s['reached_target_s']} s"
        path = " -> ".join(str(n) for n in s["distinct"])
        lines.append(
            f"| {s['start']} | {path} | {reached} | {s['reversals']} | {s['final']} | {s['tok_s']:.1f} | {s['errors']} |"
        )
    lines += [f"move: {m}" for m in out["move_lines"]]
    lines += [f"PROBLEM: {p}" for p in out["problems"]]
    return "\n".join(lines)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.tune_rig", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="crossover", help="the rig pair (default crossover)")
    p.add_argument("--steps", type=int, default=3, help="draft steps (default 3)")
    p.add_argument("--starts", type=mode_cost._levels, default=[2, 48], help="start Ns, in turn (default 2,48)")
    p.add_argument("--seconds", type=float, default=600.0, help="traffic per start (default 600)")
    p.add_argument("--clients", type=_range, default=(4, 28), help="the triangle's client counts (default 4-28)")
    p.add_argument("--hold", type=float, default=4.0, help="seconds at each client count")
    p.add_argument("--bounds", default="1-64", help="the server's --speculative-disable-auto-tune (default 1-64)")
    p.add_argument("--target", type=_range, default=(8, 16), help="Ns counted as reached (default 8-16)")
    p.add_argument("--every", type=float, default=10.0, help="read the server every S s")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--max-running-requests", type=int, default=128)
    p.add_argument("--max-total-tokens", type=int, default=16384)
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path)
    opts = p.parse_args(argv)
    try:
        parse_bounds(opts.bounds)
    except ValueError as exc:
        p.error(str(exc))
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = options(argv)
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import Spec, launch

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    load_start = os.getloadavg()
    extra = (
        *mode_cost.SERVER_EXTRA,
        "--max-total-tokens",
        str(opts.max_total_tokens),
        "--max-running-requests",
        str(opts.max_running_requests),
        "--speculative-disable-auto-tune",
        opts.bounds,
    )
    starts: list[dict[str, Any]] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tune-rig-") as tmp:
        server = launch(ensure_rig(), Spec(opts.models, extra=extra, steps=opts.steps), Path(tmp), 7200)
        try:
            log(f"{opts.models} patched server ready in {server.wait_ready(timeout_s=1200):.0f} s")
            for start in opts.starts:
                starts.append(asyncio.run(run_start(server.url, start, opts, log)))
                if opts.out:  # kept start by start
                    opts.out.write_text(json.dumps({"starts": starts}, indent=1))
            moves = [m.group(1) for m in MOVE_LINE.finditer(server.log_text())]
        finally:
            left = server.stop()
    for s in starts:
        problems += [f"start {s['start']}: {s['errors']} failed requests ({s['error_sample']})"] if s["errors"] else []
        problems += [f"start {s['start']}: never within {opts.target}"] if s["reached_target_s"] is None else []
    problems += [f"processes left: {left}"] if left else []
    out = {
        "models": f"the {opts.models} pair",
        "steps": opts.steps,
        "bounds": opts.bounds,
        "clients": f"{opts.clients[0]}-{opts.clients[1]}",
        "target": f"{opts.target[0]}-{opts.target[1]}",
        "seconds": opts.seconds,
        "load_start": load_start,
        "load_end": os.getloadavg(),
        "starts": starts,
        "move_lines": moves,
        "problems": problems,
        "unix_time": time.time(),
    }
    if opts.out:
        opts.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1) if opts.json else render(out))
    return 1 if problems else 0


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
