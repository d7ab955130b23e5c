"""What a decode step of a rig pair costs, part by part, timed inside the server.

    python -m benchmarks.rig_cost [--models deep,trained] [--batches 1,8,16]
                                  [--tokens 48] [--rounds 2] [--threads 1] [--interleave]
                                  [--json] [--out FILE]

For each pair, a plain server (the target alone) and the patched server (the EAGLE-3
pair) with ``SPECCONSOLE_RIG_STEP_TIMING`` (tests/real_sglang/rig/step_timing.py:
forwards, draft-extend and decode steps timed in the scheduler process, wall and the
scheduler thread's CPU time). Started one at a time, each running all its windows; with
``--interleave`` both are up, the one not measured paused (SIGSTOP of its process group),
and every round runs plain, target-only and speculative at each batch size, the order
rotated from round to round.
Each window is one /generate of ``b`` prompts of the trained language (greedy,
``--tokens`` new tokens each), so the decode batch is ``b`` from its first step; the
patched server runs it forced target-only and forced speculative. Printed per pair and
batch (ms, mean over the window's steps of exactly that batch size, median of rounds):

  plain: target decode forward, step period, overhead = period - forward,
         forward / overhead (the issue's goal: >= 5)
  patched target-only: target forward, draft-extend (the whole
         ``_draft_extend_for_decode``), target forward / draft-extend (goal: >= 20),
         step period
  patched speculative: target verify forward, draft-extend, draft decode forwards,
         accept length, step period
  cpu: the same forwards and step periods in CPU time, plain / target-only per step

Figures go in docs/cpu-rig.md with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from server_control.bench import loadgen
from server_control.protocol import decision

EXTRA = ("--max-total-tokens", "16384", "--max-running-requests", "48")


def _diff(after: dict, before: dict, key: str, bs: int, col: int = 1) -> tuple[int, float]:
    """Calls and seconds (``col`` 1: wall; 2: the scheduler thread's CPU) of ``key`` at ``bs``."""
    a = after.get(key, {}).get(str(bs), [0, 0.0, 0.0])
    b = before.get(key, {}).get(str(bs), [0, 0.0, 0.0])
    return int(a[0] - b[0]), float(a[col] - b[col]) if len(a) > col and len(b) > col else 0.0


def _read(directory: Path) -> dict:
    """The scheduler process's totals (the largest file: the one that ran forwards)."""
    best: dict = {}
    for f in directory.glob("*.json"):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if sum(len(v) for v in data.values()) >= sum(len(v) for v in best.values()):
            best = data
    return best


def _ms(after: dict, before: dict, key: str, bs: int, col: int = 1) -> float | None:
    n, s = _diff(after, before, key, bs, col)
    return 1000 * s / n if n else None


def window(server, timing: Path, bs: int, tokens: int, seed: int) -> dict:
    """One /generate of ``bs`` prompts; per-step means of what ran at batch ``bs``."""
    from tests.real_sglang.rig.trained_models import prompt_ids

    before = _read(timing)
    body = {
        "input_ids": [prompt_ids(seed + i) for i in range(bs)],
        "sampling_params": {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True},
    }
    t0 = time.monotonic()
    out = server.request("/generate", body, timeout=1800)
    wall = time.monotonic() - t0
    time.sleep(0.6)  # the writer thread's next dump
    after = _read(timing)
    accept = [o["meta_info"].get("spec_accept_length") for o in out]
    keys = {k for k in after} | {k for k in before}
    row = {
        "batch": bs,
        "wall_s": round(wall, 2),
        "steps": _diff(after, before, "step_period", bs)[0] + 1,
        "accept_length": statistics.mean(a for a in accept if a) if any(accept) else None,
    }
    for key in sorted(keys):
        row[key] = _ms(after, before, key, bs)
        row[f"cpu:{key}"] = _ms(after, before, key, bs, col=2)
    return row


def _median_rows(rows: list[dict]) -> dict:
    out: dict = {"batch": rows[0]["batch"], "rounds": rows}
    for key in rows[0]:
        vals: list[float] = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        if key not in ("batch", "rounds") and vals:
            out[key] = statistics.median(vals)
    return out


def _ratio(a, b):
    return a / b if a is not None and b else None


TARGET_COLD = "target_only_cold"  # forced target-only with the cold-draft mark at 1: no draft-extend


def _modes(patched: bool, cold: bool = False) -> list[str]:
    if not patched:
        return ["plain"]
    return [decision.TARGET_ONLY, *([TARGET_COLD] if cold else []), decision.SPECULATIVE]


def _cell(server, timing: Path, mode: str, bs: int, k: int, opts, name: str, log) -> dict:
    force = decision.TARGET_ONLY if mode == TARGET_COLD else mode
    if mode != "plain":
        if not asyncio.run(loadgen.set_force(server.url, force)):
            raise RuntimeError(f"{name} refused force {force}")
        if not asyncio.run(loadgen.set_setting(server.url, decision.COLD_DRAFT_KEY, 1 if mode == TARGET_COLD else 0)):
            raise RuntimeError(f"{name} refused the cold-draft mark")
    row = window(server, timing, bs, opts.tokens, 100 * k + bs)
    row["load_1m"] = os.getloadavg()[0]
    shown = {key: v for key, v in row.items() if isinstance(v, float) and key != "wall_s" and not key.startswith("cpu:draft")}
    log(f"{name} {mode} b={bs} round {k}: " + ", ".join(f"{key} {v:.2f}" for key, v in shown.items()))
    return row


def measure_pair(rig, kind: str, opts: argparse.Namespace, tmp: Path, log) -> dict:
    """Plain and patched servers of ``kind``: one after the other, or (``opts.interleave``)
    both up, the one not measured paused (SIGSTOP of its process group), every round
    running plain, target-only and speculative at each batch size in a rotated order."""
    from tests.real_sglang.rig.pool import Spec, launch
    from tests.real_sglang.rig.step_timing import ENV

    cells: dict = {m: {bs: [] for bs in opts.batches} for m in ["plain", *_modes(True, opts.cold)]}
    servers: dict = {}
    try:
        for patched in (False, True):
            timing = tmp / f"{kind}-{'patched' if patched else 'plain'}"
            spec = Spec(kind, patched=patched, extra=EXTRA)
            env = {ENV: str(timing), "OMP_NUM_THREADS": str(opts.threads)}
            server = launch(rig, spec, tmp, 7200, env_extra=env)
            servers[patched] = (server, timing, spec.name)
            log(f"{spec.name}: ready in {server.wait_ready(timeout_s=1200):.0f} s")
            window(server, timing, max(opts.batches), 8, 900)  # warm every path
            if opts.interleave:
                os.killpg(server.pgid, signal.SIGSTOP)
                continue
            for mode in _modes(patched, opts.cold):
                for bs in opts.batches:
                    for k in range(opts.rounds):
                        cells[mode][bs].append(_cell(server, timing, mode, bs, k, opts, spec.name, log))
            _stop(servers.pop(patched))
        if opts.interleave:
            arms = [(False, "plain"), *((True, m) for m in _modes(True, opts.cold))]
            for k in range(opts.rounds):
                for bs in opts.batches:
                    for patched, mode in arms[k % len(arms) :] + arms[: k % len(arms)]:
                        server, timing, name = servers[patched]
                        os.killpg(servers[not patched][0].pgid, signal.SIGSTOP)
                        os.killpg(server.pgid, signal.SIGCONT)
                        cells[mode][bs].append(_cell(server, timing, mode, bs, k, opts, name, log))
    finally:
        for key in list(servers):
            _stop(servers.pop(key))
    result: dict = {"models": kind}
    for mode, by_bs in cells.items():
        result[mode] = [_median_rows(by_bs[bs]) for bs in opts.batches]
    return result


def _stop(entry) -> None:
    server, _timing, name = entry
    try:
        os.killpg(server.pgid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    left = server.stop()
    if left:
        raise RuntimeError(f"{name}: processes left {left}")


def summarise(result: dict) -> list[dict]:
    rows = []
    colds = result.get(TARGET_COLD) or [{} for _ in result["plain"]]
    for plain, t_o, spec, cold in zip(result["plain"], result[decision.TARGET_ONLY], result[decision.SPECULATIVE], colds):
        fwd = plain.get("target:DECODE")
        period = plain.get("step_period")
        overhead = _overhead(plain)
        to_fwd = _forward(t_o)
        rows.append(
            {
                "models": result["models"],
                "batch": plain["batch"],
                "plain_forward_ms": fwd,
                "plain_period_ms": period,
                "overhead_ms": overhead,
                "forward_over_overhead": _ratio(fwd, overhead),
                "t_o_target_forward_ms": to_fwd,
                "t_o_draft_extend_ms": t_o.get("draft_extend"),
                "t_o_period_ms": t_o.get("step_period"),
                "forward_over_draft_extend": _ratio(to_fwd, t_o.get("draft_extend")),
                "plain_forward_over_draft_extend": _ratio(fwd, t_o.get("draft_extend")),
                "spec_verify_ms": spec.get("target:TARGET_VERIFY"),
                "spec_draft_extend_ms": spec.get("draft_extend"),
                "spec_draft_decode_ms": spec.get("draft:DECODE"),
                "spec_period_ms": spec.get("step_period"),
                "spec_accept_length": spec.get("accept_length"),
                "t_o_over_plain_period": _ratio(plain.get("step_period"), t_o.get("step_period")),
                "cpu_plain_forward_ms": plain.get("cpu:target:DECODE"),
                "cpu_t_o_forward_ms": _forward(t_o, "cpu:"),
                "cpu_t_o_draft_extend_ms": t_o.get("cpu:draft_extend"),
                "cpu_plain_period_ms": plain.get("cpu:step_period"),
                "cpu_t_o_period_ms": t_o.get("cpu:step_period"),
                "cpu_t_o_over_plain_period": _ratio(plain.get("cpu:step_period"), t_o.get("cpu:step_period")),
                "cold_forward_ms": _forward(cold),
                "cold_draft_extend_ms": cold.get("draft_extend"),
                "cold_period_ms": cold.get("step_period"),
                "cold_overhead_ms": _overhead(cold),
                "cold_over_plain_period": _ratio(plain.get("step_period"), cold.get("step_period")),
                "cold_over_plain_by_round": _by_round(plain, cold),
                "load_1m": statistics.mean(x for x in (plain.get("load_1m"), t_o.get("load_1m")) if x is not None),
            }
        )
    return rows


def _forward(row: dict, column: str = "") -> float | None:
    """The target's forward of a step: the verify path's on the patched server, else decode's."""
    return row.get(f"{column}target:TARGET_VERIFY") or row.get(f"{column}target:DECODE")


def _overhead(row: dict) -> float | None:
    """A step's period less its target forward and its draft-extend: the host's own part."""
    fwd = _forward(row)
    period = row.get("step_period")
    return period - fwd - (row.get("draft_extend") or 0.0) if period is not None and fwd is not None else None


def _by_round(plain: dict, other: dict) -> list[float]:
    """plain's step period over ``other``'s, round by round (the same round's windows)."""
    pairs = zip(plain.get("rounds") or [], other.get("rounds") or [])
    return [p["step_period"] / o["step_period"] for p, o in pairs if p.get("step_period") and o.get("step_period")]


def _f(v, fmt=".2f") -> str:
    return "-" if v is None else format(v, fmt)


def render(rows: list[dict]) -> str:
    cols = [
        ("pair", "models", "s"),
        ("b", "batch", "d"),
        ("plain fwd ms", "plain_forward_ms", ".2f"),
        ("plain step ms", "plain_period_ms", ".2f"),
        ("overhead ms", "overhead_ms", ".2f"),
        ("fwd / overhead", "forward_over_overhead", ".1f"),
        ("t-o fwd ms", "t_o_target_forward_ms", ".2f"),
        ("draft-extend ms", "t_o_draft_extend_ms", ".2f"),
        ("fwd / draft-extend", "forward_over_draft_extend", ".1f"),
        ("t-o step ms", "t_o_period_ms", ".2f"),
        ("plain / t-o per step", "t_o_over_plain_period", ".3f"),
        ("cpu: plain fwd ms", "cpu_plain_forward_ms", ".2f"),
        ("cpu: t-o fwd ms", "cpu_t_o_forward_ms", ".2f"),
        ("cpu: plain step ms", "cpu_plain_period_ms", ".2f"),
        ("cpu: t-o step ms", "cpu_t_o_period_ms", ".2f"),
        ("cpu: plain / t-o per step", "cpu_t_o_over_plain_period", ".3f"),
        ("cold fwd ms", "cold_forward_ms", ".2f"),
        ("cold draft-extend ms", "cold_draft_extend_ms", ".2f"),
        ("cold step ms", "cold_period_ms", ".2f"),
        ("cold overhead ms", "cold_overhead_ms", ".2f"),
        ("plain / cold per step", "cold_over_plain_period", ".3f"),
        ("load", "load_1m", ".1f"),
        ("spec step ms", "spec_period_ms", ".2f"),
        ("accept", "spec_accept_length", ".2f"),
    ]
    lines = ["| " + " | ".join(c[0] for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]) if f in ("s", "d") else _f(r[k], f) for _, k, f in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.rig_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="deep,trained")
    p.add_argument("--batches", default="1,8,16")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="OMP_NUM_THREADS of the servers (default 1: a shared, loaded CPU turns OpenMP's spinning threads into waiting)",
    )
    p.add_argument(
        "--interleave",
        action="store_true",
        help="both servers up, the idle one paused; plain, target-only and speculative windows rotated within each round",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="also target-only with the cold-draft mark at 1 (the draft's extend skipped): its step's parts beside plain's",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path)
    opts = p.parse_args(argv)
    opts.batches = sorted({int(x) for x in opts.batches.split(",") if x.strip()})
    from tests.real_sglang.rig.build import ensure_rig

    rig = ensure_rig()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rig-cost-") as tmp:
        for kind in opts.models.split(","):
            rows += summarise(measure_pair(rig, kind, opts, Path(tmp), lambda line: print(line, file=sys.stderr)))
    load = os.getloadavg()
    doc = {"rows": rows, "load_average": load}
    if opts.out:
        opts.out.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1) if opts.json else render(rows) + f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
