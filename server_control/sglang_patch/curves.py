"""The cost curves of a patched rank (``server_control.protocol.cost_curves``), fed by the worker.

``worker.on_decode_step`` calls the counters' ``step`` with the mode the switch chose and
the clock value it gave the switch; ``worker.on_verified`` calls ``commit`` with the
settled step's batch and the tokens ``SpecSwitch.record_verify`` just counted, in the mode
that step ran in (no second pass over the per-request counts). Only when the switch is
ready (the target-only state exists and the ranks agreed); never raises into serving.
Published in the worker's snapshot (``/server_info`` ``dynamic_speculation.cost_curves``)
and, through ``spec_metrics``, as ``sglang:spec_disable_bucket_*`` on ``/metrics``.
"""

from __future__ import annotations

from server_control.protocol.cost_curves import DEFAULT_CAP, SNAPSHOT_KEY, CostCounters


def new(cap: int = DEFAULT_CAP) -> CostCounters:
    """The counters: exact buckets up to ``cap`` (a tuned server: ``cost_curves.tuned_cap``)."""
    return CostCounters(cap)


def publish(snap: dict[str, object], counters: CostCounters | None) -> None:
    if counters is not None:
        snap[SNAPSHOT_KEY] = counters.snapshot()
