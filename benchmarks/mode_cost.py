"""What each mode really costs on the real server: the CPU rig's trained EAGLE-3 pair.

    python -m benchmarks.mode_cost [--levels 1,2,4,8,16] [--warmup 3] [--measure 10]
                                   [--max-tokens 64] [--json] [--out FILE]

Builds the rig (tests/real_sglang/rig: tiny target + draft trained on a period-12 language,
so the draft accepts ~3 tokens per step while its KV cache is warm), then measures with
the real ``specconsole bench --url`` (closed-loop streaming clients, tok/s in a window
after a warm-up):
(level by level, ``--repeat`` rounds of every mode, each cell the median of its rounds):
  1. a plain SGLang server (the target alone, no speculation)          -> plain
  2. the patched server, forced speculative and forced target-only       -> crossover,
     suggested threshold (the largest level below the crossover)
  3. the same server in auto at the suggested threshold                  -> auto
and prints tok/s per mode and level, the crossover, target-only / plain (what keeping the
draft warm costs: target-only still runs a one-token verify and a draft-extend per step)
and auto / max(speculative, target-only) (the envelope: what the switch loses to the
better fixed mode). One server at a time; each stopped by its process group.
Figures go in docs/cpu-rig.md. ``--plain-url``/``--url`` measure running servers instead.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from server_control import loadgen
from server_control.protocol import decision

ROOT = Path(__file__).resolve().parents[1]
SERVER_EXTRA = ("--decode-log-interval", "40", "--max-total-tokens", "8192")


def bench(url: str, modes: list[str], opts: argparse.Namespace,
          levels: list[int] | None = None) -> dict:
    """``specconsole bench --url ... --json`` (the real command line); its JSON result."""
    levels = levels or opts.levels
    cmd = [sys.executable, "-m", "console", "bench", "--url", url, "--modes", ",".join(modes),
           "--levels", ",".join(map(str, levels)), "--warmup", str(opts.warmup),
           "--measure", str(opts.measure), "--max-tokens", str(opts.max_tokens), "--json"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=len(levels) * len(modes) * (opts.warmup + opts.measure + 60)
                         + 120)
    if res.returncode != 0:
        raise RuntimeError(f"specconsole bench failed ({res.returncode}): "
                           f"{(res.stderr + res.stdout)[-3000:]}")
    return json.loads(res.stdout)


def repeated(url: str, modes: list[str], opts: argparse.Namespace) -> dict:
    """Each level in turn: ``opts.repeat`` rounds of every mode (one short ``specconsole
    bench`` each), so the drifts of a shared machine hit every mode alike; each cell is
    the median of its rounds. A discarded round at the top level warms the server first."""
    try:  # a cold server may stream nothing in a short window: that is what warming is for
        bench(url, modes[:1], opts, [max(opts.levels)])
    except RuntimeError:
        pass
    per_mode: dict[str, list[dict]] = {m: [] for m in modes}
    for c in opts.levels:
        rounds: dict[str, list[dict]] = {m: [] for m in modes}
        for _ in range(opts.repeat):
            for m in modes:
                rounds[m].append(bench(url, [m], opts, [c])["per_mode"][m][0])
        for m in modes:
            values = sorted(r["tok_s"] for r in rounds[m])
            per_mode[m].append({"concurrency": c, "tok_s": statistics.median(values),
                                "tok_s_runs": values, "errors": sum(r["errors"] for r in rounds[m])})
    cross = loadgen.crossover(per_mode)
    return {"per_mode": per_mode, "crossover": cross, "suggested_threshold":
            None if cross is None else max(1, loadgen.previous_level(opts.levels, cross))}


def tok_s(result: dict, mode: str) -> dict[int, float]:
    return {r["concurrency"]: r["tok_s"] for r in result["per_mode"][mode]}


def set_threshold(url: str, n: int) -> None:
    import httpx

    with httpx.Client(timeout=30, trust_env=False) as client:  # loopback: never a proxy
        resp = client.post(url + "/set_internal_state",
                           json={"server_args": {decision.THRESHOLD_KEY: n}})
    if resp.status_code != 200 or resp.json() != [True]:
        raise RuntimeError(f"threshold {n} refused: {resp.status_code} {resp.text[:200]}")


def measure_plain(url: str, opts) -> dict:
    return repeated(url, [decision.AUTO], opts)


def measure_patched(url: str, opts) -> dict:
    """Forced speculative and target-only, then auto at the suggested threshold."""
    fixed = repeated(url, [decision.SPECULATIVE, decision.TARGET_ONLY], opts)
    threshold = fixed["suggested_threshold"] or max(opts.levels)
    set_threshold(url, threshold)
    auto = repeated(url, [decision.AUTO], opts)
    return {"fixed": fixed, "auto": auto, "threshold": threshold}


def _runs(result: dict, mode: str, c: int) -> list[float]:
    return next((r.get("tok_s_runs", [r["tok_s"]]) for r in result["per_mode"][mode]
                 if r["concurrency"] == c), [])


def summarise(plain: dict, patched: dict, levels: list[int]) -> dict:
    spec = tok_s(patched["fixed"], decision.SPECULATIVE)
    target = tok_s(patched["fixed"], decision.TARGET_ONLY)
    auto, base = tok_s(patched["auto"], decision.AUTO), tok_s(plain, decision.AUTO)
    sources = {"speculative": (patched["fixed"], decision.SPECULATIVE),
               "target_only": (patched["fixed"], decision.TARGET_ONLY),
               "plain": (plain, decision.AUTO), "auto": (patched["auto"], decision.AUTO)}
    rows = []
    for c in levels:
        best = max(spec[c], target[c])
        rows.append({"concurrency": c, "speculative": spec[c], "target_only": target[c],
                     "plain": base[c], "auto": auto[c],
                     "runs": {name: _runs(res, mode, c) for name, (res, mode) in sources.items()},
                     "target_only_over_plain": target[c] / base[c] if base[c] else None,
                     "auto_over_best_fixed": auto[c] / best if best else None})
    errors = sum(r["errors"] for res in (plain, patched["fixed"], patched["auto"])
                 for rows_ in res["per_mode"].values() for r in rows_)
    return {"levels": levels, "rows": rows, "crossover": patched["fixed"]["crossover"],
            "auto_threshold": patched["threshold"], "errors": errors}


def render(summary: dict) -> str:
    head = ("| concurrency | speculative | target-only | plain | auto | target-only / plain "
            "| auto / max(spec, t-o) |")
    lines = [head, "| " + " | ".join("---" for _ in range(7)) + " |"]
    for r in summary["rows"]:
        ratios = [f"{v:.2f}" if v is not None else "-"
                  for v in (r["target_only_over_plain"], r["auto_over_best_fixed"])]
        lines.append(f"| {r['concurrency']} | {r['speculative']:.1f} | {r['target_only']:.1f} | "
                     f"{r['plain']:.1f} | {r['auto']:.1f} | {ratios[0]} | {ratios[1]} |")
    cross = summary["crossover"]
    lines.append("tok/s; crossover: " + (f"target-only wins from concurrency {cross}"
                                         if cross else "none (speculation never lost)")
                 + f"; auto ran at threshold {summary['auto_threshold']}"
                 + (f"; {summary['errors']} failed requests" if summary["errors"] else ""))
    return "\n".join(lines)


def _levels(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip()})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mode_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", type=_levels, default=[1, 2, 4, 8, 16])
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--measure", type=float, default=10.0)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3, help="sweeps per mode; cells are medians")
    p.add_argument("--plain-url", help="a running plain server (else one is started)")
    p.add_argument("--url", help="a running patched server (else one is started)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path, help="also write the JSON summary here")
    opts = p.parse_args(argv)
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import OneAtATime, Spec

    with tempfile.TemporaryDirectory(prefix="mode-cost-") as tmp:
        pool = OneAtATime(ensure_rig(), Path(tmp), lifetime_s=3600)
        try:
            plain = measure_plain(opts.plain_url or pool.get(
                Spec("trained", patched=False, extra=SERVER_EXTRA)).url, opts)
            patched = measure_patched(opts.url or pool.get(
                Spec("trained", extra=SERVER_EXTRA)).url, opts)
        finally:
            pool.close()
    summary = summarise(plain, patched, opts.levels)
    if opts.out:
        opts.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1) if opts.json else render(summary))
    return 0 if summary["errors"] == 0 and pool.left == [] else 1


if __name__ == "__main__":
    sys.exit(main())
