"""What follows a failed run (a crash, a watchdog stop, a failed start), for ``HealthWatch``:
a restart after the policy's backoff, or FATAL at the start limit with the reason and the
log's last lines kept in the run record; a stop or a relaunch made elsewhere during the
backoff wins over the restart (server_control/supervision/health_watch.py finds the failures).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from server_control.model.vocabulary import RunState
from server_control.state import run_logs, runs
from server_control.supervision.run_facts import RunUpdater

if TYPE_CHECKING:
    from server_control.supervision.restart_policy import RestartPolicy
    from server_control.supervision.run_processes import RunProcesses
    from server_control.supervision.supervised import SupervisedProfile

TAIL_LINES = 50


class CrashRestartPort(RunUpdater, Protocol):
    """What the restart reads and sets on its supervisor (supervisor.py)."""

    profile: SupervisedProfile
    state_dir: Path
    restarts: int
    exit_code: int | None  # the last server's
    epoch: int
    backoff_history: list[float]
    op_lock: asyncio.Lock
    policy: RestartPolicy
    procs: RunProcesses

    def journal(self, action: str, result: str, detail: str = "", **kw: Any) -> None: ...

    def load_disk(self) -> runs.RunRecord | None: ...

    def adopt(self) -> runs.RunRecord | None: ...

    async def start(self, previous_logs: list[str], runtime: dict[str, Any] | None = None) -> runs.RunRecord: ...


async def keep_record(
    rec: runs.RunRecord, state_dir: str | Path | None, change: Callable[[runs.RunRecord], None] = lambda _r: None
) -> runs.RunRecord | None:
    """The dead run's record kept for every reader, under the profile lock: the record of
    ``rec``'s pid changed, or, where none is left, ``rec`` written back changed. A restart
    removes the dead run's record before its own checks (supervisor.py ``start``), so one that
    failed them (a busy port) left no record: ``status`` elsewhere read "stopped", the FATAL
    reason was lost, and the next restart took the missing record for a stop made elsewhere.
    None (nothing written) where another run's record, or an unreadable one, is there now."""
    async with runs.profile_lock(rec.name, state_dir):
        try:
            disk = runs.load_record(rec.name, state_dir)
        except runs.RunRecordError:
            return None
        if disk is not None and disk.pid != rec.pid:
            return None
        kept = disk if disk is not None else runs.RunRecord.from_dict(dataclasses.asdict(rec), "the dead run's record")
        change(kept)
        runs.save_record(kept, state_dir)
        return kept


class CrashRestart:
    def __init__(self, sup: CrashRestartPort) -> None:
        self.sup = sup

    async def after_failure(self, rec: runs.RunRecord, code: int | None, how: str, action: str | None = None) -> None:
        self.sup.update(last_exit=f"pid {rec.pid} {how} at {time.strftime('%H:%M:%S')}")
        decision, value = self.sup.policy.after_crash(time.monotonic(), ran_for_s=rec.uptime_s)
        self.sup.journal(
            action or ("watchdog restart" if "watchdog" in how else "crash"),
            RunState.FATAL if decision == RunState.FATAL else f"restart in {float(value):g} s",
            f"pid {rec.pid}: {how}",
        )
        if decision == RunState.FATAL:
            await self._fatal(rec, code, f"{value}; last {how}")
            return
        await self._restart_after(float(value), rec)

    async def _fatal(self, rec: runs.RunRecord, code: int | None, reason: str) -> None:
        """FATAL with the reason and the log's last lines, kept in the run record for every
        reader (``keep_record``: written back where a failed restart had removed it)."""

        def fatal(r: runs.RunRecord) -> None:
            r.exit_code, r.fatal_reason = code, reason

        try:
            await keep_record(rec, self.sup.state_dir, fatal)
        except OSError as exc:
            reason += f" (not kept in the run record: {exc.strerror or exc})"
        self.sup.update(RunState.FATAL, fatal_reason=reason, fatal_tail=run_logs.tail_lines(rec.log_path, TAIL_LINES))

    async def _restart_after(self, delay: float, dead: runs.RunRecord) -> None:
        epoch = self.sup.epoch
        while True:
            self.sup.backoff_history.append(delay)
            self.sup.update(next_restart_at=time.time() + delay)
            await asyncio.sleep(delay)
            async with self.sup.op_lock:
                if epoch != self.sup.epoch:  # stopped or relaunched meanwhile
                    return
                disk = self.sup.load_disk()
                if disk is None or disk.stopping:  # stopped from elsewhere meanwhile
                    self.sup.update(RunState.STOPPED, record=None, next_restart_at=None)
                    return
                if disk.pid != dead.pid and self.sup.procs.live(disk):  # relaunched elsewhere
                    self.sup.update(next_restart_at=None)
                    self.sup.adopt()
                    return
                self.sup.restarts += 1
                runtime = disk.runtime if disk.pid == dead.pid else dead.runtime
                try:
                    await self.sup.start(previous_logs=[*dead.log_paths, dead.log_path], runtime=runtime)
                    return
                except runs.RunConflict as exc:  # someone else relaunched it: adopt theirs
                    self.sup.restarts -= 1
                    self.sup.update(last_error=str(exc), next_restart_at=None)
                    self.sup.adopt()
                    return
                except Exception as exc:  # noqa: BLE001 - busy port, bad python...: counts as a failed start
                    self.sup.policy.record_start(time.monotonic())
                    self.sup.update(RunState.CRASHED, next_restart_at=None, last_error=f"restart failed: {exc}")
                    decision, value = self.sup.policy.after_crash(time.monotonic())
                    self.sup.journal(
                        "restart failed",
                        RunState.FATAL if decision == RunState.FATAL else f"restart in {float(value):g} s",
                        f"after pid {dead.pid}: {exc}",
                    )
                    if decision == RunState.FATAL:
                        await self._fatal(dead, self.sup.exit_code, f"{value}; last start failed: {exc}")
                        return
                    try:  # the next try finds its run again (and a stop made meanwhile finds it to stop)
                        await keep_record(dead, self.sup.state_dir)
                    except OSError as exc_kept:
                        self.sup.update(last_error=f"restart failed: {exc}; run record not kept: {exc_kept.strerror or exc_kept}")
                    delay = float(value)
