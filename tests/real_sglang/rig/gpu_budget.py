"""scripts/gpu-check's time budget (test rig only): what fits in one device call.

A lent GPU gives a session ~15 min of device time in all, machine start and a retry
included, so the whole check has to fit one call of < 8 min. Each step has an estimate of
its time on one modern GPU (``ESTIMATE_S``, seconds; a server phase counts its start) and
a priority (``PRIORITY``, 1 = most valuable). ``plan`` keeps steps by priority while
their estimates fit the budget; the others are reported ``SKIP`` with what they needed.
While the run goes, ``Budget.allows`` also skips a planned step whose estimate no longer
fits what is left (an earlier step ran long), so the run ends inside the budget instead
of being killed mid-way by the call's limit. No budget (``--budget-s 0``): every step runs.

The estimates are for one H200 with the rig's tiny float32 pair and the bundle's stand-in
kernels (docs/gpu-check.md, "Time budget"): the server starts and the first checks were
measured there on 2026-12-04 (rounded up); the fault servers, the stress, ITL, adaptive and
the sweeps were not reached then and are still guesses. The CPU rig is 5-20x slower; there
the budget is off by default. Forced flips under load rank second: of the checks a CPU cannot
prove, it is the one most likely to show corruption under CUDA graphs plus the overlap
scheduler.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

T0_ENV = "SPECCONSOLE_GPU_CHECK_T0"  # wall-clock start, set before a bundle install

# step -> (priority, seconds on one GPU). Server phases: the start plus their first checks.
STEPS: dict[str, tuple[int, float]] = {
    "preflight": (1, 12),  # H200: 8-12 s
    "build the rig's trained models": (1, 10),  # H200: 8 s from the kept weights
    "start trained-plain": (1, 85),  # H200: 57-83 s
    "start patched": (1, 85),  # H200: 78 s
    "start-up": (1, 2),
    "switch both ways": (1, 5),  # H200: 1.9 s
    "graph / eager per bucket": (1, 5),  # H200: 2.4 s
    "steps=0 memory per rank": (1, 2),
    "target-only stress at max batch": (2, 20),
    "sampled requests": (2, 5),
    "forced flips under load": (2, 0),  # + --flip-seconds (``estimates``)
    "a rank fails inside a capture": (2, 100),
    "N warnings in the log": (2, 5),
    "runtime threshold": (3, 3),  # H200: 1.3 s
    "warm draft after target-only": (3, 3),  # H200: 1.2 s
    "cold draft after target-only": (3, 5),  # not yet run on a GPU: 3x the probe, a batch of 2
    "automatic switches": (3, 15),
    "a rank fails before the build": (3, 90),
    "ITL under polling": (4, 60),
    "adaptive on": (4, 110),
    "tok/s plain": (7, 20),
    "tok/s per mode": (7, 0),  # + the sweeps' windows (``estimates``)
    "tp": (2, 150),  # the tp > 1 phase, where there are GPUs for it
    "no process left": (1, 1),
}


def estimates(flip_seconds: float, levels: Iterable[int], warmup: float, measure: float, repeat: int) -> dict[str, float]:
    """Every step's estimate, the load-dependent ones from the options."""
    out = {name: est for name, (_, est) in STEPS.items()}
    out["forced flips under load"] = flip_seconds + 10
    windows = len(list(levels)) * (warmup + measure + 3) * max(1, repeat)
    out["tok/s plain"] = windows + 5
    out["tok/s per mode"] = 3 * windows + 10  # speculative, target-only and auto
    return out


def plan(order: list[str], budget_s: float, est: dict[str, float]) -> tuple[set[str], dict[str, str]]:
    """Steps kept (by priority, then run order, while the sum fits ``budget_s``) and the
    skipped ones with why. ``budget_s <= 0``: every step is kept."""
    if budget_s <= 0:
        return set(order), {}
    ranked = sorted(order, key=lambda n: (STEPS.get(n, (9, 0))[0], order.index(n)))
    kept: set[str] = set()
    skipped: dict[str, str] = {}
    used = 0.0
    for name in ranked:
        need = est.get(name, 30.0)
        if used + need <= budget_s:
            kept.add(name)
            used += need
        else:
            skipped[name] = (
                f"skipped for time: needs ~{need:.0f} s, {budget_s - used:.0f} s of the {budget_s:.0f} s "
                f"budget left after higher priorities"
            )
    return kept, skipped


class Budget:
    """The run's clock against ``budget_s`` (0: none), started at ``T0_ENV`` when set
    (the bundle's install counts) or now."""

    def __init__(self, budget_s: float, est: dict[str, float], order: list[str]) -> None:
        self.budget_s, self.est = budget_s, est
        try:
            self.t0 = float(os.environ[T0_ENV])
        except (KeyError, ValueError):
            self.t0 = time.time()
        self.kept, self.skipped = plan(order, budget_s - self.elapsed(), est)

    def elapsed(self) -> float:
        return time.time() - self.t0

    def allows(self, name: str) -> str | None:
        """None when ``name`` may run now; else why it is skipped."""
        if self.budget_s <= 0:
            return None
        if name in self.skipped:
            return self.skipped[name]
        left = self.budget_s - self.elapsed()
        need = self.est.get(name, 30.0)
        if need > left:
            return f"skipped for time: needs ~{need:.0f} s, {max(0.0, left):.0f} s of the {self.budget_s:.0f} s budget left"
        return None
