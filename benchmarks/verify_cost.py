"""Where target-only's target forward (TARGET_VERIFY, one token per request) spends more
than a plain server's (DECODE), op by op, on a rig pair.

    python -m benchmarks.verify_cost [--models deep] [--batches 8,16] [--tokens 16]
                                     [--top 25] [--threads 1] [--out FILE]

A plain server and the patched server forced target-only, started one at a time with
``SPECCONSOLE_RIG_OP_PROFILE`` (tests/real_sglang/rig/op_profile.py: every target
forward after the first few of its mode and batch size runs under torch.profiler). One
/generate of ``b`` prompts per batch size. Printed per batch size: the ``--top`` ops and
``rig:`` ranges by the larger of the two modes' self time per forward (ms), plain DECODE
beside target-only TARGET_VERIFY, their difference, and the profiled forward's total.
Profiled times are inflated by the profiler: read the differences, not the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.rig_cost import EXTRA, window
from server_control.bench import loadgen
from server_control.protocol import decision


def _tables(directory: Path) -> dict:
    out: dict = {}
    for f in directory.glob("*.ops.json"):
        out.update(json.loads(f.read_text()))
    return out


def profile_server(rig, kind: str, patched: bool, opts, tmp: Path, log) -> dict:
    from tests.real_sglang.rig.op_profile import ENV
    from tests.real_sglang.rig.pool import Spec, launch

    prof = tmp / f"{kind}-{'patched' if patched else 'plain'}-ops"
    spec = Spec(kind, patched=patched, extra=EXTRA)
    server = launch(rig, spec, tmp, 3600, env_extra={ENV: str(prof), "OMP_NUM_THREADS": str(opts.threads)})
    try:
        log(f"{spec.name}: ready in {server.wait_ready(timeout_s=1200):.0f} s")
        if patched and not asyncio.run(loadgen.set_force(server.url, decision.TARGET_ONLY)):
            raise RuntimeError(f"{spec.name} refused force target-only")
        for bs in opts.batches:
            window(server, tmp / "unused", bs, opts.tokens, 300 + bs)
    finally:
        left = server.stop()
        if left:
            raise RuntimeError(f"{spec.name}: processes left {left}")
    return _tables(prof)


def compare(plain: dict, t_o: dict, bs: int, top: int) -> list[dict]:
    a, b = plain.get(f"DECODE:{bs}"), t_o.get(f"TARGET_VERIFY:{bs}")
    if not a or not b:
        return []
    rows = []
    for key in set(a["ops"]) | set(b["ops"]):
        pa, pb = a["ops"].get(key, [0, 0.0, 0.0]), b["ops"].get(key, [0, 0.0, 0.0])
        ranged = key.startswith("rig:")
        col = 2 if ranged else 1  # a range's own time is its total; an op's is its self time
        rows.append(
            {
                "op": key,
                "plain_calls": pa[0] / a["forwards"],
                "t_o_calls": pb[0] / b["forwards"],
                "plain_ms": pa[col] / a["forwards"] / 1000,
                "t_o_ms": pb[col] / b["forwards"] / 1000,
            }
        )
    for r in rows:
        r["delta_ms"] = r["t_o_ms"] - r["plain_ms"]
    ranges = sorted((r for r in rows if r["op"].startswith("rig:")), key=lambda r: -max(r["plain_ms"], r["t_o_ms"]))
    ops = sorted((r for r in rows if not r["op"].startswith("rig:")), key=lambda r: -abs(r["delta_ms"]))
    return ranges + ops[:top]


def render(bs: int, rows: list[dict]) -> str:
    lines = [f"b={bs}: ms per profiled target forward (plain DECODE vs target-only TARGET_VERIFY)"]
    lines.append(f"{'op / range':60s} {'calls p':>8s} {'calls t-o':>9s} {'plain':>9s} {'t-o':>9s} {'delta':>9s}")
    for r in rows:
        lines.append(
            f"{r['op'][:60]:60s} {r['plain_calls']:8.0f} {r['t_o_calls']:9.0f} "
            f"{r['plain_ms']:9.3f} {r['t_o_ms']:9.3f} {r['delta_ms']:+9.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.verify_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="deep")
    p.add_argument("--batches", default="8,16")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path)
    opts = p.parse_args(argv)
    opts.batches = sorted({int(x) for x in opts.batches.split(",") if x.strip()})
    from tests.real_sglang.rig.build import ensure_rig

    rig = ensure_rig()
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="verify-cost-") as tmp:
        plain = profile_server(rig, opts.models, False, opts, Path(tmp), log)
        t_o = profile_server(rig, opts.models, True, opts, Path(tmp), log)
    doc = {str(bs): compare(plain, t_o, bs, opts.top) for bs in opts.batches}
    if opts.out:
        opts.out.write_text(json.dumps({"plain": plain, "target_only": t_o, "rows": doc}, indent=1))
    print("\n\n".join(render(bs, doc[str(bs)]) for bs in opts.batches))
    return 0


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
