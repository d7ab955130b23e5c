"""Live scheduler statistics and the step-timing check (actual vs model step time)."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stats:
    running: int = 0
    waiting: int = 0
    tokens_in_use: int = 0
    token_usage: float = 0.0
    gen_throughput: float = 0.0
    accept_length: float = 0.0
    accept_rate: float = 0.0
    steps: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    finished_total: int = 0
    busy_seconds: float = 0.0  # simulated seconds spent in steps (the GPUs' utilisation: sim/gpus.py)
    idle_seconds: float = 0.0  # simulated seconds with nothing to run, to the last idle's end (sim/gpus.py)


@dataclass
class StepTiming:
    """Actual wall interval of back-to-back steps against the model (time-scaled)."""

    errors: collections.deque[Any] = field(default_factory=lambda: collections.deque(maxlen=4096))
    count: int = 0
    lag_s: float = 0.0

    def add(self, expected: float, actual: float) -> None:
        if expected > 0:
            self.errors.append((actual - expected) / expected)
            self.count += 1

    def reset(self) -> None:
        self.errors.clear()
        self.count = 0

    def summary(self) -> dict[str, Any]:
        # the scheduler thread appends while HTTP reads: copy first (list() of a deque runs
        # in C under the GIL, a generator over it does not)
        raw = list(self.errors)
        errs = sorted(abs(e) for e in raw)
        if not errs:
            return {
                "steps": 0,
                "mean_abs_error": None,
                "p50": None,
                "p99": None,
                "max": None,
                "mean_error": None,
                "lag_s": round(self.lag_s, 4),
            }

        def pick(q: float) -> float:
            return float(errs[min(len(errs) - 1, int(q * len(errs)))])

        return {
            "steps": self.count,
            "mean_abs_error": sum(errs) / len(errs),
            "mean_error": sum(raw) / len(raw),
            "p50": pick(0.5),
            "p99": pick(0.99),
            "max": errs[-1],
            "lag_s": round(self.lag_s, 4),
        }
