"""``--sim-light``: the TP ranks as objects inside the main process instead of spawned
processes, for fleets of many simulated replicas (one process each, ~40 MB, no spawn).

Same interface as ``rank_processes.RankGroup`` and the same per-rank logic (``worker.handle``):
every rank runs its own ``SpecSwitch`` and logs its own lines with its rank tag; only the
process model differs (no orphaned ranks after a SIGKILL, ``rank_pids`` is the main pid).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from server_control.sim.logfmt import Logger, rank_tag
from server_control.sim.rank_processes import RankError
from server_control.sim.worker import CRASH_TRACEBACK, handle, make_switch, startup_lines


class LightRankGroup:
    def __init__(self, tp_size: int, cfg: dict[str, Any]) -> None:
        self.logs = [Logger(rank_tag(r, cfg["tp_size"])) for r in range(tp_size)]
        self.switches: list[Any] = [None] * tp_size
        self._cfg = cfg
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._init_rank, args=(r,), name=f"sim-TP{r}", daemon=True) for r in range(tp_size)
        ]
        for t in self._threads:  # the start-up lines of all ranks interleave, as with processes
            t.start()

    def _init_rank(self, rank: int) -> None:
        try:
            startup_lines(self._cfg, self.logs[rank])
            self.switches[rank] = make_switch(self._cfg, self.logs[rank], rank)
        except BaseException as exc:  # noqa: BLE001 - reported by wait_ready
            self._error = exc

    @property
    def pids(self) -> list[int]:
        return [os.getpid()] * len(self.logs)

    def wait_ready(self, timeout: float) -> None:
        for rank, t in enumerate(self._threads):
            t.join(timeout)
            if t.is_alive():
                raise RankError(f"TP{rank} did not finish initialisation within {timeout:.0f} s")
        if self._error is not None:
            raise RankError(f"a rank failed to initialise: {self._error}")

    def step(self, step_no: int, batch: int, lines: list[str]) -> str | None:
        modes = [
            handle(r, sw, log, ("step", step_no, batch, lines))[2] for r, (sw, log) in enumerate(zip(self.switches, self.logs))
        ]
        if any(m != modes[0] for m in modes):
            raise RankError(f"TP ranks disagree on the mode of step {step_no}: {modes}")
        mode: str | None = modes[0]
        return mode

    def apply(self, key: str, value: object) -> tuple[bool, str]:
        replies = [
            handle(r, sw, log, ("set", key, value), self._cfg.get("off_reason"))
            for r, (sw, log) in enumerate(zip(self.switches, self.logs))
        ]
        return all(r[1] for r in replies), replies[0][2]

    def crash(self) -> None:
        self.logs[0].error(CRASH_TRACEBACK)

    def stop(self, timeout: float = 3.0) -> None:
        pass
