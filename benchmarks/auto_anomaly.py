"""Why did the old mode_cost report auto above forced speculative? The experiment.

    python -m benchmarks.auto_anomaly [--levels 8] [--rounds 3] [--warmup 3] [--measure 10]
                                      [--models trained] [--url URL] [--json] [--out FILE]

One patched server (the rig's trained pair, ``--enable-metrics``, threshold = twice the
top level so auto speculates at every level), and in every round, in this order:

  target_only_a        forced target-only (what the old harness ran before each
                       forced-speculative cell)
  spec_after_t_o_raw   forced speculative right after it, NOT drained (the old harness)
  target_only_b        forced target-only again
  spec_after_t_o       forced speculative right after it, drained first
  speculative          forced speculative after a speculative window, drained
  auto_sham            a force=0 (auto) call, then the window (how the new harness runs auto)
  auto_untouched       no call at all (how the old harness ran auto), drained

Each window records what the server still ran when it began (``leftover``, from
``/v1/loads``), the server's milliseconds per decode step (its decode-pass counter) and
the patch's step counters (share of steps target-only). If forcing itself cost anything,
speculative < auto_sham = auto_untouched; if the old harness's windows were polluted by the
target-only window before them, spec_after_t_o_raw < spec_after_t_o = speculative, with a
leftover. Figures go in docs/cpu-rig.md.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
from pathlib import Path

from benchmarks import interleave, mode_cost
from benchmarks.interleave import Arm
from server_control.bench import loadgen
from server_control.protocol import decision

SPEC, TARGET, AUTO = decision.SPECULATIVE, decision.TARGET_ONLY, decision.AUTO


def arms(url: str) -> list[Arm]:
    return [
        Arm("target_only_a", url, TARGET),
        Arm("spec_after_t_o_raw", url, SPEC, drain=False),
        Arm("target_only_b", url, TARGET),
        Arm("spec_after_t_o", url, SPEC),
        Arm("speculative", url, SPEC),
        Arm("auto_sham", url, AUTO),
        Arm("auto_untouched", url, None),
    ]


async def run(url: str, opts) -> dict:
    plan = arms(url)
    await interleave.window(plan[0], plan, max(opts.levels), opts, None)  # warm the server
    per_arm: dict[str, list[dict]] = {a.name: [] for a in plan}
    for c in opts.levels:
        done: dict[str, list[dict]] = {a.name: [] for a in plan}
        for k in range(opts.rounds):
            for arm in plan:
                row = await interleave.window(arm, plan, c, opts, None)
                row["round"] = k
                done[arm.name].append(row)
                ms = (row.get("steps") or {}).get("ms_per_step")
                print(
                    f"c={c} round {k} {arm.name:>18}: {row['tok_s']:8.1f} tok/s, "
                    f"{ms if ms is None else round(ms, 2)} ms/step, leftover "
                    f"{row['leftover']}, t-o share "
                    f"{(row.get('steps') or {}).get('target_only_share')}",
                    file=sys.stderr,
                )
        for name in per_arm:
            per_arm[name].append(loadgen.level_cell(c, name, done[name]))
    return {"levels": opts.levels, "per_arm": per_arm}


def render(result: dict) -> str:
    lines = [
        "| c | arm | tok/s (rounds) | ms/step (rounds) | left over at start | t-o share |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, cells in result["per_arm"].items():
        for cell in cells:
            left = [r.get("leftover") for r in cell["rounds"]]
            runs = ", ".join(f"{v:.0f}" for v in cell["tok_s_runs"])
            ms = ", ".join(f"{v:.1f}" for v in cell["ms_per_step_runs"])
            share = cell["target_only_share"]
            lines.append(
                f"| {cell['concurrency']} | {name} | {cell['tok_s']:.1f} ({runs}) | "
                f"{mode_cost._f(cell['ms_per_step'], '.2f')} ({ms}) | {left} | "
                f"{mode_cost._f(share, '.2f')} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    opts = mode_cost.options(argv)
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import Spec, launch

    left: list[int] = []
    with tempfile.TemporaryDirectory(prefix="auto-anomaly-") as tmp:
        server = None
        url = opts.url
        try:
            if url is None:
                server = launch(ensure_rig(), Spec(opts.models, extra=mode_cost.SERVER_EXTRA), Path(tmp), 7200)
                server.wait_ready(timeout_s=900)
                url = server.url
            mode_cost.set_threshold(url, 2 * max(opts.levels))
            result = asyncio.run(run(url, opts))
        finally:
            if server is not None:
                interleave.signal_group(server.pgid, signal.SIGCONT)
                left = server.stop()
    result["processes_left"] = left
    if opts.out:
        opts.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1) if opts.json else render(result))
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
