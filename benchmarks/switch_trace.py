"""What a switch costs, read from a rig server's per-step trace (pure; no server).

The trace is ``tests/real_sglang/rig/step_timing.py``'s (``SPECCONSOLE_RIG_STEP_TRACE``):
one row per decode ``run_batch``, ``[start, seconds, batch, speculative steps, target-only
steps, verifies, accepted drafts]``, the step counters read after the step and the
acceptance counters before it. ``steps`` turns rows into one ``Step`` per decode step (its
mode from which of the patch's counters moved; its verifies and accepted drafts from the
next row), ``switch_latency`` compares the first step after each switch with the steady
steps of the same mode and batch size, and ``acceptance_around_resume`` compares the
accept length of the speculative steps right after a resume with those right before the
switch to target-only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

SPEC, TARGET = "speculative", "target_only"


@dataclass(frozen=True)
class Step:
    start: float
    seconds: float
    batch: int
    mode: str
    verifies: int | None  # None: the last row (no later acceptance read)
    accepted: int | None


def steps(rows: list[list[float]]) -> list[Step]:
    """One Step per trace row whose mode is known (the first row has no predecessor to
    diff against; a row where neither or both counters moved is a malformed trace)."""
    out = []
    for i in range(1, len(rows)):
        prev, row = rows[i - 1], rows[i]
        d_spec, d_to = int(row[3] - prev[3]), int(row[4] - prev[4])
        if (d_spec, d_to) not in ((1, 0), (0, 1)):
            raise ValueError(f"trace row {i}: the step counters moved by {d_spec} speculative, {d_to} target-only")
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        out.append(
            Step(
                start=row[0],
                seconds=row[1],
                batch=int(row[2]),
                mode=SPEC if d_spec else TARGET,
                verifies=int(nxt[5] - row[5]) if nxt else None,
                accepted=int(nxt[6] - row[6]) if nxt else None,
            )
        )
    return out


def switch_indices(trace: list[Step]) -> list[int]:
    """Indices of the first step of every new mode."""
    return [i for i in range(1, len(trace)) if trace[i].mode != trace[i - 1].mode]


def switch_latency(trace: list[Step], settle: int = 3) -> dict[str, dict]:
    """Per direction (the mode switched to): the first step after each switch against the
    median of the steady steps (``settle`` or more steps after a switch) of the same mode
    and batch size. ``extra_ms``: first-step time minus that median, per switch."""
    since: list[int] = []
    n = 0
    for i, s in enumerate(trace):
        n = 0 if i == 0 or s.mode != trace[i - 1].mode else n + 1
        since.append(n if i else settle)  # the trace's first step counts as steady
    steady: dict[tuple[str, int], list[float]] = {}
    for s, k in zip(trace, since, strict=True):
        if k >= settle:
            steady.setdefault((s.mode, s.batch), []).append(s.seconds)
    out: dict[str, dict] = {}
    for mode in (SPEC, TARGET):
        extra, first, base, unmatched = [], [], [], 0
        for i in switch_indices(trace):
            s = trace[i]
            if s.mode != mode:
                continue
            ref = steady.get((mode, s.batch))
            if not ref:
                unmatched += 1
                continue
            med = statistics.median(ref)
            first.append(1000 * s.seconds)
            base.append(1000 * med)
            extra.append(1000 * (s.seconds - med))
        out[mode] = {
            "switches": len(extra) + unmatched,
            "unmatched": unmatched,  # no steady step of that mode and batch to compare with
            "first_step_ms_median": statistics.median(first) if first else None,
            "steady_ms_median": statistics.median(base) if base else None,
            "extra_ms_median": statistics.median(extra) if extra else None,
            "extra_ms": [round(x, 3) for x in extra],
        }
    return out


def _accept(run: list[Step]) -> float | None:
    verifies = sum(s.verifies or 0 for s in run)
    return 1 + sum(s.accepted or 0 for s in run) / verifies if verifies else None


def acceptance_around_resume(trace: list[Step], window: int = 200) -> list[dict]:
    """For every target-only stretch with speculative steps on both sides: the accept
    length over the up to ``window`` speculative steps before it and the up to ``window``
    after it (only steps whose acceptance was read)."""
    out = []
    cuts = switch_indices(trace)
    for a, b in zip(cuts, cuts[1:], strict=False):
        if trace[a].mode != TARGET or trace[b].mode != SPEC:
            continue
        before = [s for s in trace[:a] if s.mode == SPEC and s.verifies is not None][-window:]
        after = [s for s in trace[b:] if s.mode == SPEC and s.verifies is not None][:window]
        out.append(
            {
                "resume_index": b,
                "target_only_steps": b - a,
                "before_steps": len(before),
                "after_steps": len(after),
                "before": _accept(before),
                "after": _accept(after),
            }
        )
    return out


def step_ms(trace: list[Step]) -> dict[str, dict[str, list[float]]]:
    """Per mode and batch size: [steps, median ms] of every step in the trace."""
    cells: dict[tuple[str, int], list[float]] = {}
    for s in trace:
        cells.setdefault((s.mode, s.batch), []).append(1000 * s.seconds)
    out: dict[str, dict[str, list[float]]] = {}
    for (mode, batch), ms in sorted(cells.items()):
        out.setdefault(mode, {})[str(batch)] = [len(ms), round(statistics.median(ms), 3)]
    return out


def matched_cost(auto: dict[str, dict[str, list[float]]], forced: dict[str, dict[str, list[float]]], mode: str) -> dict:
    """Auto's steps of ``mode`` against the forced arm's steps of the same mode and batch
    size: the step-weighted ratio of medians (1.0: a step in auto costs what it costs
    forced, switching adds nothing per step), over the batch sizes both ran."""
    num = den = 0.0
    steps = 0
    for batch, (n, ms) in (auto.get(mode) or {}).items():
        ref = (forced.get(mode) or {}).get(batch)
        if ref:
            num, den, steps = num + n * ms, den + n * ref[1], steps + int(n)
    return {"steps_matched": steps, "auto_over_forced": num / den if den else None}
