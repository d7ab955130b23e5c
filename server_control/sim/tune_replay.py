"""The tuner in closed loop on the simulator's step-cost model, in simulated time (pure).

No processes, no sleeping: a loop of decode steps whose batch follows traffic levels, each
step's mode chosen as the server chooses it (``decision.SpecSwitch`` at N, then
exploration, ``explore.Explorer``, as the product applies it), timed by the simulator's
model (``model.step_ms``, with noise) and counted in the project's own cost counters
(``cost_curves.CostCounters``, exact buckets up to ``cost_curves.tuned_cap``, as the
simulator and the patch count them); a step that also prefills is left untimed, as the
simulator leaves it (``CostCounters.idle``). Every simulated second the published curves
(``snapshot`` -> ``parse``) go to ``tuner.Tuner.observe`` and a move sets N at once.

``GPU_CURVES``: three flat-then-linear calibrations (``model.flat_then_linear``) whose best
N is 13, 56 and beyond the running cap (64: N belongs at the top bound). ``replay`` gives
N's path, the minute N came within one bucket of the best N to stay, and the reversals
(moves against the direction of the one before). ``python -m server_control.sim.tune_replay``
prints the table for starts 2, 5, 20, 32, 48 and 60; ``--seeds K`` also replays every case
at seeds 0..K-1 and counts those that meet the goal (``meets_goal``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from server_control.protocol import cost_curves, decision, explore, runtime_settings
from server_control.protocol.tuner import DEFAULT_EXPLORE_SHARE, Tuner, TuneSettings
from server_control.sim import model

RUNNING_CAP = 64
LEVEL_S = 5.0  # traffic: a new level of concurrency every LEVEL_S simulated seconds
SPREAD = 8  # batches wander within this much of the level
PREFILL_SHARE = 0.04  # steps that also prefill (left untimed in the curves)
NOISE = 0.03  # relative step-time noise


@dataclass(frozen=True)
class GpuCurve:
    name: str
    cal: model.Calibration

    def best_n(self, hi: int = RUNNING_CAP) -> int:
        """The threshold that maximises throughput at every batch, within 1..hi."""
        cross = model.crossover(self.cal)
        return hi if cross is None or cross - 1 > hi else max(1, cross - 1)


GPU_CURVES = (
    GpuCurve("best N 13", model.flat_then_linear(20.0, 1.18, 3.0)),
    GpuCurve("best N 56", model.flat_then_linear(20.0, 0.28, 3.0)),
    GpuCurve("best N beyond the cap", model.flat_then_linear(20.0, 0.16, 3.0)),
)
STARTS = (2, 5, 20, 32, 48, 60)


@dataclass(frozen=True)
class Replay:
    curve: str
    start: int
    best: int
    path: tuple[tuple[float, int], ...]  # (simulated second, N) at each move, from (0, start)
    minutes: float
    reversals: int

    @property
    def final(self) -> int:
        return self.path[-1][1]

    def settled_min(self, cap: int = RUNNING_CAP) -> float | None:
        """The simulated minute from which N stayed within one bucket of the best (None: not at the end)."""
        near = [abs(cost_curves.bucket_index(n, cap) - cost_curves.bucket_index(self.best, cap)) <= 1 for _t, n in self.path]
        if not near[-1]:
            return None
        i = len(near) - 1
        while i > 0 and near[i - 1]:
            i -= 1
        return self.path[i][0] / 60.0

    def reversals_per_30(self) -> float:
        return self.reversals * 30.0 / self.minutes


def _accept_sd(cal: model.Calibration) -> float:
    """Standard deviation of one request's tokens per speculative step."""
    p, n = model.accept_probability(cal), cal.calibrated_num_steps
    probs = [p**k * (1 - p) for k in range(n)] + [p**n]
    mean = sum((k + 1) * q for k, q in enumerate(probs))
    return math.sqrt(sum((k + 1 - mean) ** 2 * q for k, q in enumerate(probs)))


def replay(
    curve: GpuCurve,
    start: int,
    minutes: float = 30.0,
    seed: int = 0,
    settings: TuneSettings | None = None,
    explore_share: float = DEFAULT_EXPLORE_SHARE,
    cap: int = RUNNING_CAP,
) -> Replay:
    settings = settings or TuneSettings(1, cap)
    rng = random.Random(seed)
    cal = curve.cal
    sd = _accept_sd(cal)
    counters = cost_curves.CostCounters(cost_curves.tuned_cap(settings.hi))
    switch = decision.SpecSwitch(start)
    explorer = explore.Explorer(explore_share)
    tuner = Tuner(settings)
    t, step_no, next_obs, next_level = 0.0, 0, 0.0, 0.0
    level = batch = min(cap, start)
    path, direction, reversals = [(0.0, start)], 0, 0
    end = minutes * 60.0
    while t < end:
        if t >= next_level:
            level, next_level = rng.randint(1, cap), next_level + LEVEL_S
        if rng.random() < 0.3:
            batch += 1 if batch < level - SPREAD else -1 if batch > level + SPREAD else rng.choice((-1, 1))
            batch = max(1, min(cap, batch))
        switch.decide(batch, t)
        mode = explorer.mode(switch.mode, step_no, batch, switch.threshold)
        counters.step(mode, batch, t, 500.0)
        dt = model.step_ms(mode, batch, cal) * (1.0 + rng.gauss(0.0, NOISE))
        if rng.random() < PREFILL_SHARE:  # a mixed step: its prefill is no decode cost
            counters.idle()
            dt += model.prefill_ms(rng.randint(100, 2000), cal)
        t += dt / 1000.0
        if mode == decision.SPECULATIVE:
            tokens = max(batch, round(rng.gauss(batch * cal.accept_length, sd * math.sqrt(batch))))
        else:
            tokens = batch
        counters.commit(mode, batch, tokens)
        step_no += 1
        if t >= next_obs:
            next_obs += 1.0
            move = tuner.observe(t, cost_curves.parse(counters.snapshot()), switch.threshold, explorer.share > 0)
            if move is not None:
                d = 1 if move.new > move.old else -1
                reversals += d == -direction
                direction = d
                runtime_settings.apply(switch, runtime_settings.THRESHOLD, move.new)
                path.append((t, move.new))
    return Replay(curve.name, start, curve.best_n(settings.hi), tuple(path), minutes, reversals)


def meets_goal(r: Replay, goal_min: float = 10.0, max_reversals_per_30: float = 2.0) -> bool:
    """Within one bucket of the best N by ``goal_min`` and stays there; few reversals."""
    settled = r.settled_min()
    return settled is not None and settled <= goal_min and r.reversals_per_30() <= max_reversals_per_30


def table(minutes: float = 30.0, seed: int = 0) -> list[str]:
    lines = ["curve                  best start final settled_min reversals/30min"]
    for curve in GPU_CURVES:
        for start in STARTS:
            r = replay(curve, start, minutes, seed)
            settled = r.settled_min()
            lines.append(
                f"{curve.name:22} {r.best:4} {start:5} {r.final:5} "
                f"{'never' if settled is None else f'{settled:.1f}':>11} {r.reversals_per_30():8.1f}"
            )
    return lines


def sweep(seeds: int, minutes: float = 30.0) -> list[str]:
    """Every curve from every start at seeds 0..seeds-1: the replays that miss the goal, and the count."""
    misses, total = [], 0
    for seed in range(seeds):
        for curve in GPU_CURVES:
            for start in STARTS:
                r = replay(curve, start, minutes, seed)
                total += 1
                if not meets_goal(r):
                    settled = r.settled_min()
                    when = "never" if settled is None else f"{settled:.1f} min"
                    path = " ".join(str(n) for _t, n in r.path)
                    misses.append(f"miss: {curve.name} from {start} seed {seed}: settled {when}, {r.reversals} reversals: {path}")
    shape = f"{seeds} seeds x {len(GPU_CURVES)} curves x {len(STARTS)} starts, {minutes:g} simulated minutes each"
    return [*misses, f"meet the goal: {total - len(misses)} of {total} ({shape})"]


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m server_control.sim.tune_replay", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--seeds", type=int, default=0, help="also replay every case at seeds 0..N-1 and count those meeting the goal"
    )
    ap.add_argument("--minutes", type=float, default=30.0)
    args = ap.parse_args()
    print("\n".join(table(args.minutes)))
    if args.seeds > 0:
        print("\n".join(sweep(args.seeds, args.minutes)))
