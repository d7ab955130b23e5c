"""The run behind a session: what launches, stops and reports the server process.

``Session`` talks to one of these (``RunLike``): ``ProfileRun`` (a profile's run: given a
``RunSupervisorPort``, as every console is, a client of the run's own detached supervisor;
without one, supervised in this process, as a library session is), ``AttachedRun`` (a
server someone else runs: refuses to launch or stop it), or the fleet's ``RemoteRun`` (a
profile's run on another host, over SSH).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from server_control.advice.store import CurvesHome
from server_control.model.operation import OperationResult
from server_control.model.run_status import RunStatus
from server_control.model.supervisor_start import SupervisorStart
from server_control.model.vocabulary import EXTERNAL_STATE, FINAL_STATES, STOPPED_STATES, Outcome, RunState
from server_control.state.restart_lock import RestartLock
from server_control.telemetry.sample import Sample

if TYPE_CHECKING:
    from server_control.config.profile import Profile


log = logging.getLogger(__name__)
NOT_OWNED = "attached to a server this console does not own: launch, stop and restart need a profile"


class RunLike(Protocol):
    async def start(self, on_change: Callable[[], None]) -> None: ...

    async def close(self) -> None: ...

    def log_path(self) -> Path | None: ...

    def pids(self) -> list[int]: ...

    def on_sample(self, sample: Sample) -> None: ...

    def status(self) -> RunStatus: ...

    async def launch(self) -> OperationResult: ...

    async def stop(self) -> OperationResult: ...

    async def restart(self) -> OperationResult: ...

    async def remember_runtime(self, key: str, value: object) -> str | None:
        """Keep an applied runtime setting where a restart finds it (runs with a record).
        None: kept (or nothing to keep); else why it could not be kept."""

    def owns_server(self) -> bool | None:
        """Is what answers on the run's port this run's server? None: cannot tell (no
        claim: an attached server, a remote host)."""

    def history_dir(self) -> Path | None:
        """The state dir whose history this session keeps on disk; None: memory only (an
        attached server; a headless command, which only reads and writes no state)."""

    def curves_home(self, url: str) -> CurvesHome | None:
        """Where this session keeps the server's cost curves (the advisor's); None: not kept
        (as ``history_dir``, unless the fleet keeps a member's: remote, or at a URL)."""


class RunSupervisorPort(Protocol):
    """Starts a run's own detached supervisor (console/run_supervisor.py): a `specconsole
    supervise` in its own session, which outlives the console."""

    async def launch(self, port: int) -> SupervisorStart:
        """A supervisor that launches the run on ``port`` and supervises it; answered once it
        said launched (or why not)."""

    def adopt(self, port: int) -> SupervisorStart:
        """A supervisor for the live run on ``port`` that has none (it never launches)."""


OWNER_TTL_S = 5.0  # how long an answer to "is it ours?" is kept (the same leader pid)


class AttachedRun:
    """No process of ours: a server someone else runs (state "external")."""

    def __init__(self, log_path: str | Path | None = None, curves_home: CurvesHome | None = None) -> None:
        self._log_path = Path(log_path) if log_path else None
        self._curves_home = curves_home

    async def start(self, on_change: Callable[[], None]) -> None:
        pass

    async def close(self) -> None:
        pass

    def log_path(self) -> Path | None:
        return self._log_path

    def pids(self) -> list[int]:
        return []

    def on_sample(self, sample: Sample) -> None:
        pass

    def status(self) -> RunStatus:
        return RunStatus(state=EXTERNAL_STATE, log_path=str(self._log_path) if self._log_path else None)

    async def launch(self) -> OperationResult:
        return OperationResult("launch", Outcome.REFUSED, NOT_OWNED)

    async def stop(self) -> OperationResult:
        return OperationResult("stop", Outcome.REFUSED, NOT_OWNED)

    async def restart(self) -> OperationResult:
        return OperationResult("restart", Outcome.REFUSED, NOT_OWNED)

    async def remember_runtime(self, key: str, value: object) -> str | None:
        return None  # not ours to restart: nothing to re-apply

    def owns_server(self) -> bool | None:
        return None  # whoever answers at the URL is the server asked for

    def history_dir(self) -> Path | None:
        return None

    def curves_home(self, url: str) -> CurvesHome | None:
        return self._curves_home


SUPERVISOR_START_WAIT_S = 15.0  # a supervisor started for a run gets this long to take the lock


class ProfileRun:
    """The profile's run through server_control.supervision.supervisor.Supervisor. With ``supervise``
    the session runs ``Supervisor.watch()``; without it (headless read-only commands) it only
    adopts, and the run state is judged from the leader process and the HTTP poll.

    ``supervisors`` given (every console): the run's own detached supervisor restarts its
    crashes; this session's watch never takes the restart lock. A launch starts that
    supervisor, which launches; a live run found without one (its supervisor was killed)
    gets one, said in ``supervisor_note``, unless it was launched ``--no-supervise``. Stop and
    restart are done here under the run's locks, as `specconsole stop` / `restart` do them:
    the supervisor sees the record and follows (server_control/supervision/health_watch.py).
    Without ``supervisors`` (a library session) the watch supervises in this process while it
    runs, and nobody does after it closes."""

    def __init__(
        self,
        profile: Profile,
        state_dir: str | Path | None = None,
        supervise: bool = True,
        supervisors: RunSupervisorPort | None = None,
    ) -> None:
        from server_control.supervision.supervisor import Supervisor  # noqa: PLC0415 - heavy, profile case only

        self.sup = Supervisor(profile, state_dir=state_dir)
        self.supervise = supervise
        self.supervisors = supervisors
        if supervisors is not None:
            self.sup.ownership.may_lock = False
        self.supervisor_note: str | None = None  # the last supervisor this session started, and why
        self._started_supervisor: tuple[float, int | None] = (-SUPERVISOR_START_WAIT_S, None)  # (monotonic, pid)
        self._watch: asyncio.Task[Any] | None = None
        self._pids: list[int] = []
        self._reachable = False
        self._owner: tuple[float, int | None, bool | None] = (0.0, None, None)  # (when, leader pid, answer)

    def history_dir(self) -> Path | None:
        return self.sup.state_dir if self.supervise else None

    def curves_home(self, url: str) -> CurvesHome | None:
        return CurvesHome(self.sup.state_dir, url) if self.supervise else None

    async def start(self, on_change: Callable[[], None]) -> None:
        self.sup.on_change = lambda _sup: on_change()
        self.sup.adopt()
        if self.supervise:
            self._watch = asyncio.create_task(self.sup.watch(), name="supervise")
            self.ensure_supervised()

    def ensure_supervised(self) -> SupervisorStart | None:
        """A client of the run's supervisor (``supervisors`` given) that finds the live run
        without one (killed, or an earlier version's console left it) starts one and says so
        (``supervisor_note``, logged); never for a run launched ``--no-supervise``. What was
        started, or None."""
        rec = self.sup.record
        if (
            self.supervisors is None
            or rec is None
            or rec.unsupervised
            or self.sup.state in FINAL_STATES
            or self.sup.state in STOPPED_STATES
            or self.sup.supervisor_of() is not None
            or RestartLock.held_elsewhere(self.sup.profile.name, self.sup.state_dir)  # one that has not named itself yet
        ):
            return None
        when, _pid = self._started_supervisor
        if time.monotonic() - when < SUPERVISOR_START_WAIT_S:
            return None  # the one started a moment ago is still starting
        lost = self.sup.ownership.lost()
        got = self.supervisors.adopt(self.sup.profile.port)
        self._started_supervisor = (time.monotonic(), got.pid)
        why = f"its supervisor (pid {lost.pid}) ended without detaching" if lost is not None else "nobody supervised it"
        self.supervisor_note = f"{why}: {got.detail}"
        log.warning("%s: %s", self.sup.profile.name, self.supervisor_note)
        self.sup.changed()
        return got

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            try:
                await self._watch
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the watch ends here; its last error was already reported
                pass
            self._watch = None

    def log_path(self) -> Path | None:
        rec = self.sup.record
        return Path(rec.log_path) if rec else None

    def pids(self) -> list[int]:
        return list(self._pids)  # read by the NVML thread: a copy made on the loop

    def on_sample(self, sample: Sample) -> None:
        self._reachable = sample.reachable
        self._pids = [p.pid for p in self.sup.processes()]
        if sample.reachable and sample.next_poll_s is not None:  # this run's server answered (not another's)
            self.sup.poll_answered(time.monotonic() - (sample.poll_s or 0.0), sample.next_poll_s)
        if self.supervise:
            self.ensure_supervised()

    def owns_server(self) -> bool | None:
        """Whether a process of this run (the recorded, verified leader or one of its
        processes) holds the listening socket of the profile's port. False when the run is
        not live (stopped, crashed, fatal, no record): then whatever answers is another's."""
        from server_control.host.listener import listening_pid  # noqa: PLC0415

        rec = self.sup.record
        if rec is None or self.sup.state in STOPPED_STATES:
            return False
        when, pid, answer = self._owner
        now = time.monotonic()
        if pid == rec.pid and now - when < OWNER_TTL_S:
            return answer
        pids = [rec.pid] + [p.pid for p in self.sup.processes() if p.pid != rec.pid]
        try:
            answer = listening_pid(pids, self.sup.profile.port) is not None
        except PermissionError:
            answer = None
        self._owner = (now, rec.pid, answer)
        return answer

    def status(self) -> RunStatus:
        st = self.sup.status()
        rec = self.sup.record
        if not self.supervise and rec is not None and st.state in (RunState.STARTING, RunState.UNHEALTHY):
            if not rec.is_live():
                st = dataclasses.replace(st, state=RunState.CRASHED)
            elif self._reachable:
                st = dataclasses.replace(st, state=RunState.READY)
            elif rec.health == RunState.UNHEALTHY or rec.ready_at:  # it answered before: not starting
                st = dataclasses.replace(st, state=RunState.UNHEALTHY)
        return dataclasses.replace(st, supervisor_note=self.supervisor_note) if self.supervisor_note else st

    async def launch(self) -> OperationResult:
        if self.supervisors is None:
            return await self._start("launch", self.sup.launch)
        live = self.sup.adopt()
        if live is not None:  # launched elsewhere a moment ago
            why = f"profile {self.sup.profile.name!r} is already running: pid {live.pid} on {live.host}:{live.port}"
            return OperationResult("launch", Outcome.REFUSED, why, run=self.status())
        got = await self.supervisors.launch(self.sup.profile.port)
        self._started_supervisor = (time.monotonic(), got.pid)
        self.sup.adopt()
        return OperationResult("launch", got.outcome, got.detail, run=self.status())

    async def restart(self) -> OperationResult:
        return await self._start("restart", self.sup.restart)

    async def _start(self, operation: str, action: Callable[[], Awaitable[object]]) -> OperationResult:
        from server_control.config.profile import ProfileError  # noqa: PLC0415
        from server_control.state.runs import RunConflict  # noqa: PLC0415

        try:
            await action()
        except (RunConflict, ProfileError) as exc:  # a live run, a busy port, a bad profile
            return OperationResult(operation, Outcome.REFUSED, str(exc), run=self.status())
        except Exception as exc:  # noqa: BLE001 - OSError, RuntimeError, ...: all reported
            return OperationResult(operation, Outcome.FAILED, str(exc), run=self.status())
        return OperationResult(operation, Outcome.DONE, "launched" if operation == "launch" else "restarted", run=self.status())

    async def remember_runtime(self, key: str, value: object) -> str | None:
        try:
            return await self.sup.remember_runtime(key, value)
        except Exception as exc:  # noqa: BLE001 - the change is applied; only its memory is lost
            log.exception("keeping the runtime setting in the run record failed")
            return f"the run record could not be written ({exc})"

    async def stop(self) -> OperationResult:
        res = await self.sup.stop()
        return OperationResult("stop", Outcome.DONE if res.ok else Outcome.FAILED, res.message, run=self.status())
