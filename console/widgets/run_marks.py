"""Run boundaries in the mode timeline: where the current run began after a restart, among
the switches (the switches below it belong to the run before). The run's start is an ISO
time with its zone (the run record); a switch's time is the log's local time: both are
compared as local times. A time that does not parse puts the mark on top."""

from __future__ import annotations

from datetime import datetime

from server_control.model.run_status import RunStatus


def local(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        t = datetime.fromisoformat(str(ts).replace(" ", "T", 1) if "T" not in str(ts) else str(ts))
    except ValueError:
        return None
    return t.astimezone().replace(tzinfo=None) if t.tzinfo is not None else t


def local_clock(ts: str | None) -> str | None:
    """The run's start as the log's local time ('2026-11-29T10:00:00')."""
    t = local(ts)
    return t.isoformat() if t is not None else ts


def restart_label(run: RunStatus) -> str | None:
    """'restart 2' for a run that began by a restart (None for a first run)."""
    if not run.restarts:
        return None
    return f"restart {run.restarts}"  # the last exit itself: in the header (console/widgets/status_bar.py)


def mark_index(switch_times: list[str | None], started_at: str | None) -> int:
    """How many of the switches (oldest first) came before the run's start."""
    start = local(started_at)
    if start is None:
        return len(switch_times)
    n = 0
    for ts in switch_times:
        t = local(ts)
        if t is not None and t < start:
            n += 1
    return n
