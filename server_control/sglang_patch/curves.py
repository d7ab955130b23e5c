"""The cost curves of a patched rank (``server_control.cost_curves``), fed by the worker.

``worker.on_decode_step`` calls ``on_step`` with the mode the switch chose and the clock
value it gave the switch; ``worker.on_verified`` calls ``on_commit`` with the settled
step's per-request accepted drafts, in the mode that step ran in. Only when the switch is
ready (the target-only state exists and the ranks agreed); never raises into serving.
Published in the worker's snapshot (``/server_info`` ``dynamic_speculation.cost_curves``)
and, through ``spec_metrics``, as ``sglang:spec_disable_bucket_*`` on ``/metrics``.
"""
from __future__ import annotations

from typing import Any

from server_control.cost_curves import SNAPSHOT_KEY, CostCounters


def new() -> CostCounters:
    return CostCounters()


def on_step(counters: CostCounters, mode: str, batch_size: int, now: float) -> None:
    counters.step(mode, batch_size, now)


def on_commit(counters: CostCounters, mode: str, accepted_per_request: Any) -> None:
    n = len(accepted_per_request)
    counters.commit(mode, n, sum(accepted_per_request) + n)


def publish(snap: dict[str, Any], counters: CostCounters | None) -> None:
    if counters is not None:
        snap[SNAPSHOT_KEY] = counters.snapshot()
