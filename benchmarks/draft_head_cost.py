"""What skipping draft-extend's lm_head while target-only saves (sglang_patch/
lazy_draft_head.py), two patched servers side by side.

    python -m benchmarks.draft_head_cost [--models deep] [--batches 8,16] [--rounds 3]
                                         [--tokens 32] [--json]

Arms: ``lazy`` (the patch as shipped) and ``kept`` (``SPECCONSOLE_LAZY_DRAFT_HEAD=0``),
both forced target-only, both with rig/step_timing.py. The server not measured is paused
(SIGSTOP of its process group), the order is rotated each round. Per arm and batch: the
whole draft-extend (ms, ``_draft_extend_for_decode``) and the step (ms, ``run_batch``
start to start), medians of the rounds; the saving is kept - lazy. Figures go in
docs/cpu-rig.md with the load average.
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
from pathlib import Path
from typing import Any

from benchmarks.rig_cost import EXTRA, window
from server_control.bench import loadgen
from server_control.protocol import decision

ARMS = ("lazy", "kept")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.draft_head_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="deep")
    p.add_argument("--batches", default="8,16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    batches = sorted({int(x) for x in opts.batches.split(",") if x.strip()})
    from server_control.sglang_patch.lazy_draft_head import ENV as LAZY_ENV
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import Spec, launch
    from tests.real_sglang.rig.step_timing import ENV

    rig = ensure_rig()
    servers: dict = {}
    rows: dict = {arm: {bs: [] for bs in batches} for arm in ARMS}
    with tempfile.TemporaryDirectory(prefix="draft-head-") as tmp:
        try:
            for arm in ARMS:
                env = {ENV: f"{tmp}/{arm}", "OMP_NUM_THREADS": "1", LAZY_ENV: "1" if arm == "lazy" else "0"}
                server = launch(rig, Spec(opts.models, extra=EXTRA), Path(tmp) / arm, 7200, env_extra=env)
                server.wait_ready(timeout_s=1200)
                if not asyncio.run(loadgen.set_force(server.url, decision.TARGET_ONLY)):
                    raise RuntimeError(f"{arm}: force target-only refused")
                window(server, Path(tmp) / arm, max(batches), 8, 900)  # warm
                os.killpg(server.pgid, signal.SIGSTOP)
                servers[arm] = server
            for k in range(opts.rounds):
                for arm in loadgen.rotated(list(ARMS), k):
                    server = servers[arm]
                    os.killpg(server.pgid, signal.SIGCONT)
                    for bs in batches:
                        row = window(server, Path(tmp) / arm, bs, opts.tokens, 100 * k + bs)
                        rows[arm][bs].append(row)
                        print(
                            f"round {k} {arm} b={bs}: draft-extend "
                            f"{row.get('draft_extend') or 0:.2f} ms, step "
                            f"{row.get('step_period') or 0:.2f} ms",
                            file=sys.stderr,
                        )
                    os.killpg(server.pgid, signal.SIGSTOP)
        finally:
            left = []
            for server in servers.values():
                os.killpg(server.pgid, signal.SIGCONT)
                left += server.stop()
    out = []
    for bs in batches:
        cell: dict[str, Any] = {"batch": bs}
        for arm in ARMS:
            for key in ("draft_extend", "step_period"):
                vals = [r[key] for r in rows[arm][bs] if r.get(key) is not None]
                cell[f"{arm}_{key}_ms"] = statistics.median(vals) if vals else None
                cell[f"{arm}_{key}_runs"] = vals
        lz, kp = cell["lazy_draft_extend_ms"], cell["kept_draft_extend_ms"]
        cell["draft_extend_saving_ms"] = kp - lz if lz is not None and kp is not None else None
        out.append(cell)
    load = os.getloadavg()
    doc = {"rows": out, "load_average": load, "processes_left": left}
    if opts.json:
        print(json.dumps(doc, indent=1))
    else:
        print("| b | draft-extend kept | draft-extend lazy | saving | step kept | step lazy |")
        print("|---|---|---|---|---|---|")
        for c in out:

            def f(v):
                return "-" if v is None else f"{v:.2f} ms"

            print(
                f"| {c['batch']} | {f(c['kept_draft_extend_ms'])} | "
                f"{f(c['lazy_draft_extend_ms'])} | {f(c['draft_extend_saving_ms'])} | "
                f"{f(c['kept_step_period_ms'])} | {f(c['lazy_step_period_ms'])} |"
            )
        print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0 if not left else 1


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
