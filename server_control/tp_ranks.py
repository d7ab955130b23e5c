"""Every tensor-parallel rank's live switch values, as ``/server_info`` publishes them.

``internal_states[i]["dynamic_speculation"]["ranks"]`` is one entry per TP rank of DP
group ``i`` (the SGLang patch gathers them from every rank; the simulator reports its
ranks the same way). Shared by the patch, the simulator and the clients that compare
them (a rank that disagrees with TP0 is a fault to show). Standard library only.
"""
from __future__ import annotations

LIVE_KEYS = ("active", "threshold", "hysteresis", "min_dwell_steps", "force", "mode",
             "num_steps", "switch_count", "last_batch")
COMPARED = ("active", "threshold", "hysteresis", "min_dwell_steps", "force", "mode")


def live_entry(rank: int, snapshot: dict) -> dict:
    """One rank's entry from its snapshot (``SpecSwitch.snapshot()`` + active, num_steps)."""
    entry = {key: snapshot.get(key) for key in LIVE_KEYS}
    entry["rank"] = rank
    entry["active"] = bool(snapshot.get("active", True))
    return entry


def disagreement(rows: list) -> str | None:
    """Which ranks hold other settings or another mode than TP0, or None."""
    rows = [r for r in rows if isinstance(r, dict)]
    if len(rows) < 2:
        return None
    first = rows[0]
    parts = []
    for row in rows[1:]:
        keys = [k for k in COMPARED if row.get(k) != first.get(k)]
        if keys:
            parts.append(f"TP{row.get('rank')} " + ", ".join(f"{k}={row.get(k)}" for k in keys)
                         + " (TP0: " + ", ".join(f"{k}={first.get(k)}" for k in keys) + ")")
    return "; ".join(parts) or None
