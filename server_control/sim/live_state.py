"""The simulator's ``dynamic_speculation`` entry, as the SGLang patch publishes it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Protocol

from server_control.protocol import cost_curves, decision, explore, rank_verdict
from server_control.sim import args as simargs

if TYPE_CHECKING:
    from server_control.sim.autotune import AutoTune


class SwitchHolder(Protocol):
    """What the entry is read from (the scheduler, scheduler.py)."""

    args: argparse.Namespace
    spec: bool
    off_reason: str | None
    num_steps: int
    switch: decision.SpecSwitch | None
    curves: cost_curves.CostCounters | None
    explorer: explore.Explorer
    autotune: AutoTune | None


def tp_rank_rows(sched: SwitchHolder) -> list[dict[str, Any]]:
    failed = sched.args.sim_fail_build_rank
    return [
        {"rank": r, "active": r != failed, "reason": simargs.FAIL_BUILD_WHY if r == failed else None}
        for r in range(sched.args.tp_size)
    ]


def switch_snapshot(sched: SwitchHolder) -> dict[str, Any] | None:
    """The switch's snapshot + active, reason, the draft steps really run, the cost curves,
    exploration and auto-tune, and with TP > 1 every rank (the ranks agree every step, or
    the simulator stops). None without speculative decoding."""
    tp = sched.args.tp_size
    if sched.switch is None:
        if not sched.spec:
            return None
        return {"enabled": False, "active": False, "reason": sched.off_reason, "tp_ranks": tp_rank_rows(sched)}
    snap = sched.switch.snapshot()
    snap.update(active=True, reason=None, num_steps=sched.num_steps if snap["mode"] == decision.SPECULATIVE else 0)
    if sched.curves is not None:
        snap[cost_curves.SNAPSHOT_KEY] = sched.curves.snapshot()
    snap[explore.SNAPSHOT_KEY] = sched.explorer.snapshot(snap["threshold"])
    if sched.autotune is not None:
        snap["auto_tune"] = sched.autotune.snapshot()
    if tp > 1:
        snap["tp_ranks"] = tp_rank_rows(sched)
        snap["ranks"] = [rank_verdict.live_entry(r, snap) for r in range(tp)]
    return snap
