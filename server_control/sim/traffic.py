"""Built-in traffic: how many requests the simulator keeps in flight by itself."""

from __future__ import annotations

import math

from server_control.protocol.sim_flags import Traffic
from server_control.protocol.sim_phases import Phase, phase_at


def default_peak(threshold: int) -> int:
    """Peak concurrency that crosses the threshold well (2N + 2), or 12 without one."""
    return 2 * threshold + 2 if threshold > 0 else 12


def target_concurrency(traffic: Traffic, t: float, threshold: int) -> int:
    """Requests to keep in flight at simulated time ``t`` seconds after ready."""
    if traffic.kind == "idle":
        return 0
    if traffic.kind == "steady":
        return traffic.peak
    if traffic.kind == "phases":
        _i, ph, into = phase_at(traffic.phases, t)
        return ph.concurrency(into)
    peak = traffic.peak or default_peak(threshold)
    phase = (t % traffic.period_s) / traffic.period_s
    if traffic.kind == "ramp":  # saw-tooth 1 .. peak
        return min(peak, 1 + int(phase * peak))
    # wave: 1 .. peak .. 1, a cosine
    return 1 + round((peak - 1) * (1 - math.cos(2 * math.pi * phase)) / 2)


def current_phase(traffic: Traffic, t: float) -> tuple[int, Phase] | None:
    """(index, phase) of phased traffic at ``t``; None for the other profiles."""
    if traffic.kind != "phases" or not traffic.phases:
        return None
    i, ph, _into = phase_at(traffic.phases, t)
    return i, ph
