"""Arms measured window by window, interleaved: each arm a server and the force mode it
sets; one closed-loop window per arm and level, the order rotated each round, every other
server of ours paused (SIGSTOP of its process group) while one is measured and drained
before its window; on the same servers (``interleaved``) or on servers launched for each
round (``relaunched``). Used by ``mode_cost`` and the benchmarks built on it (advise_rig,
auto_anomaly, tune_rig) and by scripts/gpu-check."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from benchmarks.mode_cost_report import AUTO, SPEC, TARGET
from server_control.bench import loadgen
from server_control.protocol import decision


@dataclass
class Arm:
    """One arm: the server it runs on, the force mode it sets (None: sets nothing), the
    process group to resume for its window (None: not ours to pause), and the cold-draft
    mark its windows run with (``cold_draft_above``; None: sets nothing, a server without
    the patch)."""

    name: str
    url: str
    force: str | None
    group: int | None = None
    drain: bool = True
    during: Callable[[], AbstractContextManager[object]] = nullcontext  # held for its windows
    cold: int | None = None


def cold_problem(arm: Arm, row: dict) -> str | None:
    """Why a window did not run the draft as its arm claims, by the server's own counters:
    an arm with a cold mark whose target-only steps were never cold, or one with the mark at
    0 that ran a cold step (a mark left behind by another arm)."""
    steps = row.get("steps") or {}
    cold, by_mode = steps.get("cold_steps"), steps.get("steps") or {}
    if arm.cold is None or cold is None:
        return None
    if arm.cold == 0 and cold:
        return f"{arm.name}: {cold} target-only steps ran cold with the mark at 0"
    if arm.cold > 0 and by_mode.get(decision.TARGET_ONLY) and not cold:
        return f"{arm.name}: {by_mode[decision.TARGET_ONLY]} target-only steps, none cold (mark {arm.cold})"
    return None


def signal_group(group: int | None, sig: int) -> None:
    if group is not None:
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            pass


def _expected_problem(arm: Arm, row: dict, threshold: int | None) -> str | None:
    """Auto with c clients holds at most 2c requests (each client's finished request not yet
    freed beside its next one): at 2c <= N every step must be speculative."""
    if arm.force != AUTO or threshold is None or 2 * row["concurrency"] > threshold:
        return None
    steps = (row.get("steps") or {}).get("steps")
    if steps and steps.get(decision.TARGET_ONLY):
        return f"auto at c={row['concurrency']} <= threshold {threshold} ran {steps[decision.TARGET_ONLY]} steps target-only"
    return None


async def window(arm: Arm, arms: list[Arm], c: int, opts: argparse.Namespace, threshold: int | None) -> dict:
    for other in arms:
        if other.group is not None and other.group != arm.group:
            signal_group(other.group, signal.SIGSTOP)
    signal_group(arm.group, signal.SIGCONT)
    if arm.force is not None and not await loadgen.set_force(arm.url, arm.force):
        raise RuntimeError(f"{arm.name}: the server refused {decision.FORCE_KEY}={arm.force}")
    if arm.cold is not None and not await loadgen.set_setting(arm.url, decision.COLD_DRAFT_KEY, arm.cold):
        raise RuntimeError(f"{arm.name}: the server refused {decision.COLD_DRAFT_KEY}={arm.cold}")
    with arm.during():
        r = await loadgen.run_level(
            arm.url,
            c,
            warmup_s=opts.warmup,
            measure_s=opts.measure,
            max_tokens=opts.max_tokens,
            mode=arm.force or AUTO,
            drain=arm.drain,
        )
    row = r.summary()
    row["mode"] = arm.name
    row["problem"] = row["problem"] or _expected_problem(arm, row, threshold) or cold_problem(arm, row)
    return row


async def _warm(arms: list[Arm], opts: argparse.Namespace) -> None:
    """A discarded window of each arm at the top level: a cold server may stream nothing in
    its first window."""
    for arm in arms:
        await window(arm, arms, max(opts.levels), opts, None)


async def _round(
    arms: list[Arm],
    c: int,
    k: int,
    opts: argparse.Namespace,
    threshold: int | None,
    progress: Callable[[str], None] | None,
    done: dict[str, list[dict]],
) -> None:
    """Round ``k`` at concurrency ``c``: every arm once, the order rotated by ``k``."""
    by_name = {a.name: a for a in arms}
    for name in loadgen.rotated([a.name for a in arms], k):
        row = await window(by_name[name], arms, c, opts, threshold)
        row["round"] = k
        done.setdefault(name, []).append(row)
        if progress:
            ms = (row.get("steps") or {}).get("ms_per_step")
            progress(
                f"c={c} round {k} {name:>12}: {row['tok_s']:8.1f} tok/s"
                + (f", {ms:.2f} ms/step" if ms else "")
                + (f", {row['leftover']} left over" if row.get("leftover") else "")
                + (f"  PROBLEM {row['problem']}" if row.get("problem") else "")
            )


def _rounds(opts: argparse.Namespace) -> int:
    return int(getattr(opts, "rounds", 0) or getattr(opts, "repeat", 1) or 1)


def _cells(names: list[str], levels: list[int], done: dict[int, dict[str, list[dict]]]) -> dict:
    return {"per_mode": {n: [loadgen.level_cell(c, n, done[c][n]) for c in levels] for n in names}}


async def interleaved(
    arms: list[Arm], opts: argparse.Namespace, threshold: int | None = None, progress: Callable[[str], None] | None = None
) -> dict:
    """Level by level, ``opts.rounds`` rounds of every arm on the same servers (order
    rotated each round); every server warmed first."""
    await _warm(arms, opts)
    done: dict[int, dict[str, list[dict]]] = {c: {} for c in opts.levels}
    for c in opts.levels:
        for k in range(_rounds(opts)):
            await _round(arms, c, k, opts, threshold, progress, done[c])
    _resume(arms)
    return _cells([a.name for a in arms], opts.levels, done)


async def relaunched(
    start: Callable[[], AbstractContextManager[list[Arm]]],
    opts: argparse.Namespace,
    threshold: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Round by round, each round on servers launched for it (``start()``: a context that
    launches every arm's server and stops them on leaving): every level, every arm once,
    the order rotated by the round. One launch of a configuration can run ~30 % faster or
    slower than the next (docs/cpu-rig.md), an offset no number of rounds on the same
    servers removes; across launches it varies, and each cell's median is over launches."""
    names: list[str] = []
    done: dict[int, dict[str, list[dict]]] = {c: {} for c in opts.levels}
    for k in range(_rounds(opts)):
        with start() as arms:
            names = names or [a.name for a in arms]
            if [a.name for a in arms] != names:
                raise RuntimeError(f"round {k} launched arms {[a.name for a in arms]}, the first round {names}")
            await _warm(arms, opts)
            for c in opts.levels:
                await _round(arms, c, k, opts, threshold, progress, done[c])
            _resume(arms)
    return _cells(names, opts.levels, done)


def _resume(arms: list[Arm]) -> None:
    for arm in arms:
        signal_group(arm.group, signal.SIGCONT)


def patched_arms(url: str, group: int | None = None) -> list[Arm]:
    """The patched server's three arms, each with the draft kept warm (the cold mark at 0)."""
    return [Arm(SPEC, url, SPEC, group, cold=0), Arm(TARGET, url, TARGET, group, cold=0), Arm(AUTO, url, AUTO, group, cold=0)]
