"""Each xdist worker's share of a run, for its summary: the seconds its tests took (setup,
call and teardown as pytest timed them), how many ran, those of the real-server group, and
when it finished. The worker that finishes last is the run's critical path: time taken off
the other one's tests does not shorten the run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Worker:
    busy_s: float = 0.0
    tests: int = 0
    group_tests: int = 0  # of the real-server group
    group_busy_s: float = 0.0
    done_at: float = 0.0


@dataclass
class WorkerLoad:
    group: str
    started: float = field(default_factory=time.time)
    workers: dict[str, Worker] = field(default_factory=dict)

    def add(self, worker: str, nodeid: str, when: str, duration: float, now: float | None = None) -> None:
        w = self.workers.setdefault(worker, Worker())
        w.busy_s += duration
        in_group = nodeid.endswith("@" + self.group)
        if in_group:
            w.group_busy_s += duration
        if when == "call":
            w.tests += 1
            w.group_tests += in_group
        w.done_at = (time.time() if now is None else now) - self.started

    def lines(self) -> list[str]:
        if len(self.workers) < 2:
            return []
        last = max(w.done_at for w in self.workers.values())
        out = []
        for name, w in sorted(self.workers.items()):
            out.append(
                f"{name}: {w.tests} tests, busy {w.busy_s:.0f} s (real-server group: {w.group_tests} tests, "
                f"{w.group_busy_s:.0f} s), its last test ended at {w.done_at:.0f} s"
                + (" (the run's critical path)" if w.done_at == last else "")
            )
        return out
