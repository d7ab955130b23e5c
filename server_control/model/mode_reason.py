"""Why the server is in its mode, in one sentence, from what it reports (``SpecStatus``) and
the decode batch of the last poll:

    target-only: batch 9 > N=5; back to speculative at <= 4 (after >= 10 steps in a mode)
    speculative: batch 3 <= N=5; target-only above 5
    target-only: forced (F cycles back to auto)

The band is the patch's own rule (protocol/decision.py: target-only above N, speculative
again at or below the low mark ``max(1, N - hysteresis)``, no switch before
``min_dwell_steps`` steps in a mode). The server does not publish how many steps its current
mode has lasted, so the dwell is said as the rule, not counted down.
"""

from __future__ import annotations

from server_control.model.snapshot import SpecStatus

WORD = {"speculative": "speculative", "target_only": "target-only"}


def mode_reason(spec: SpecStatus, batch: int | None) -> str:
    mode = WORD.get(spec.mode or "", None)
    if mode is None:
        return ""
    if spec.force not in (None, "auto"):
        return f"{mode}: forced (F cycles back to auto)"
    n = spec.threshold
    if n is None:
        return f"{mode}: N not read yet"
    if n == 0:
        return f"{mode}: N=0, speculation is never turned off"
    low = spec.low_mark if spec.low_mark is not None else max(1, n - (spec.hysteresis or 0))
    dwell = f" (after >= {spec.min_dwell_steps} steps in a mode)" if spec.min_dwell_steps else ""
    b = "?" if batch is None else str(batch)
    if spec.mode == "target_only":
        if batch is not None and batch <= low:
            return f"target-only: batch {b} <= {low}: back to speculative at the next step{dwell}"
        cmp = ">" if batch is None or batch > n else "<="
        return f"target-only: batch {b} {cmp} N={n}; back to speculative at <= {low}{dwell}"
    if batch is not None and batch > n:
        return f"speculative: batch {b} > N={n}: target-only at the next step{dwell}"
    return f"speculative: batch {b} <= N={n}; target-only above {n}{dwell}"
