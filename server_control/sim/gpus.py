"""The simulated GPUs (``GET /sim/gpus``, server_control/protocol/sim_gpus.py): one per rank,
numbers that follow the scheduler's load as a GPU's do under SGLang.

- utilisation: the share of the last window's simulated time spent in steps (NVML's
  "a kernel was running"), the same for every rank of a step; the window counts time in
  steps and time idle, not time the scheduler fell behind a starved machine's clock;
- memory: flat, as SGLang's (weights, the KV pool allocated at start, the graphs and a
  little workspace that grows with load: `--mem-fraction-static` of an 80 GB card);
- power and temperature: idle plus a share proportional to utilisation (an H100 SXM: 700 W).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from server_control.protocol.sim_gpus import NAME

if TYPE_CHECKING:
    from server_control.sim.scheduler import Scheduler

MEM_TOTAL_MB = 81559
STATIC_MB = 69_000  # weights + KV pool + graphs: ~0.85 of the card, taken at start
WORK_MB = 3_000  # activations and workspace at full load
IDLE_W, BUSY_W = 95.0, 590.0  # idle draw, and what full utilisation adds
IDLE_C, BUSY_C = 33, 30  # idle temperature, and what full utilisation adds
WINDOW_S = 1.0  # simulated seconds the utilisation is measured over (NVML: 1/6 s to 1 s)


class SimGpus:
    def __init__(self, sched: Scheduler, count: int) -> None:
        self.sched = sched
        self.count = max(1, count)
        self._marks: collections.deque[tuple[float, float]] = collections.deque(maxlen=64)  # (busy + idle s, busy s)

    def utilisation(self) -> int:
        """Percent of the last ``WINDOW_S`` simulated seconds spent in steps, counted over the
        time spent in steps or idle: when the machine is too slow for the simulated pace, the
        scheduler falls behind the clock with work waiting, and that time is neither (on a
        starved machine the wall-derived share read 31 % for a server stepping back to back)."""
        with self.sched.cond:
            busy, idle = self.sched.activity()
        now = busy + idle
        self._marks.append((now, busy))
        while len(self._marks) > 2 and self._marks[1][0] <= now - WINDOW_S:
            self._marks.popleft()
        t0, b0 = self._marks[0]
        if now - t0 <= 0:  # the first reading: the share since the server became ready
            b0, idle0 = self.sched.ready_activity
            t0 = b0 + idle0
        if now - t0 <= 0:
            return 0
        return max(0, min(100, round(100 * (busy - b0) / (now - t0))))

    def answer(self) -> dict[str, Any]:
        util = self.utilisation() if self.sched.ready else 0
        pids = list(self.sched.ranks.pids)
        share = util / 100
        return {
            "gpus": [
                {
                    "index": i,
                    "name": NAME,
                    "util": util,
                    "mem_used_mb": STATIC_MB + round(WORK_MB * share) if self.sched.ready else 0,
                    "mem_total_mb": MEM_TOTAL_MB,
                    "power_w": round(IDLE_W + BUSY_W * share, 1),
                    "temp_c": IDLE_C + round(BUSY_C * share),
                    "pids": [pids[i]] if i < len(pids) else [],
                }
                for i in range(self.count)
            ]
        }
