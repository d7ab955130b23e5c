"""One server run of one profile: launch, adopt, watch (health + crash restart), stop.

API (used by server_control.session.session and the headless commands)::

    profile = load_profile(path)                       # server_control.config.profile
    sup = Supervisor(profile, state_dir=None, on_change=callback, role="console")
    rec = sup.adopt()          # RunRecord of a live run of this profile, or None.
                               # Live = pid, start time AND command line match. A dead
                               # record is removed; leftover processes of it are named in
                               # sup.last_error and stopped by the next launch()/stop().
    rec = await sup.launch()   # RunConflict if a live run holds this profile or its port;
                               # ProfileError (file + key) for a busy port / bad profile.
    await sup.watch()          # supervision loop (server_control/supervision/health_watch.py)
    res = await sup.stop(grace=None)   # -> process.StopResult (ok, remaining [(pid, cmdline)])
    rec = await sup.restart()          # stop + launch
    sup.state        # starting | ready | unhealthy | crashed | stopped | fatal
    sup.restarts, sup.record, sup.exit_code, sup.fatal_reason, sup.fatal_tail (last 50 lines),
    sup.last_error, sup.backoff_history, sup.processes() -> [ProcInfo], sup.status() -> RunStatus,
    sup.status_json() -> dict (its JSON)
    (the "run" part of the session snapshot, docs/architecture.md).

A launch holds the profile's record lock (and its port's) from the "already running?"
check to the saved record, so two launches at the same moment give one run. Exit codes
come from the run's keeper (server_control/proc/keeper.py), whoever launched it. `stop` marks
the record ``stopping`` first, so a supervisor elsewhere reports "stopped", not a crash
(and its watchdog leaves the server alone while it shuts down).

Composition: the ``Supervisor`` holds the run's state (the fields above) and the parts that
do the work, each with its own fields and a reference back to it: ``health_watch``
(``HealthWatch``: the loop, health, watchdog, crash restart), ``ownership`` (``Ownership``:
the restart lock, this process's role, the hand-over), ``procs`` (``RunProcesses``: the
leader verified, the run's processes), ``carried`` (``CarriedSettings``: runtime settings
kept over a restart) and ``policy`` (``RestartPolicy``). The parts change the run's state
only through ``update()``, which checks each transition and tells ``on_change``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any, Unpack

from server_control.host import identity
from server_control.model.run_status import RunStatus, SupervisorInfo
from server_control.model.vocabulary import STOPPED_STATES, Outcome, RunState, check_transition
from server_control.proc import process, run_recovery
from server_control.proc.process import ProcInfo, StopResult
from server_control.state import journal, restart_lock, run_logs, runs
from server_control.state.runs import RunConflict
from server_control.state.state_dir import resolve_state_dir
from server_control.supervision import found_run
from server_control.supervision.carried_settings import CarriedSettings, ended_with_the_run, not_reapplied
from server_control.supervision.health_watch import HealthWatch
from server_control.supervision.ownership import Ownership
from server_control.supervision.restart_policy import RestartPolicy
from server_control.supervision.run_facts import RunFacts
from server_control.supervision.run_processes import RunProcesses
from server_control.supervision.supervised import SupervisedProfile

log = logging.getLogger(__name__)


class Supervisor:
    """The run's state and its operations; the machinery lives in its parts: ``health_watch``
    (the watch loop), ``ownership`` (the restart lock and hand-over), ``procs`` (the run's
    processes), ``carried`` (runtime settings kept over a restart), ``policy`` (restarts)."""

    def __init__(
        self,
        profile: SupervisedProfile,
        state_dir: str | Path | None = None,
        on_change: Callable[[Supervisor], None] | None = None,
        role: str = "console",
    ) -> None:
        self.profile = profile
        self.state_dir = resolve_state_dir(state_dir)
        self.on_change = on_change
        self.state = RunState.STOPPED
        self.restarts = 0
        self.record: runs.RunRecord | None = None
        self.exit_code: int | None = None
        self.fatal_reason: str | None = None
        self.fatal_tail: list[str] = []
        self.last_error: str | None = None
        self.health_error: str | None = None
        self.backoff_history: list[float] = []
        self.next_restart_at: float | None = None  # time.time() of the pending restart
        self.runtime_note: str | None = None  # what became of the runtime settings at the last restart
        self.last_exit: str | None = None  # how the server last ended on its own (kept across restarts)
        self.policy = RestartPolicy.from_profile(profile.restart)
        self.epoch = 0  # bumped by launch/stop: a pending restart of an old epoch aborts
        self.op_lock = asyncio.Lock()  # one launch, stop or restart at a time
        self.health_watch = HealthWatch(self)
        self.ownership = Ownership(self, role)
        self.procs = RunProcesses(self)
        self.carried = CarriedSettings(self)

    # -- state ------------------------------------------------------------------------------
    def update(self, state: RunState | None = None, **facts: Unpack[RunFacts]) -> None:
        """Set the run state (checked against vocabulary.TRANSITIONS: a change the state
        machine does not allow raises TransitionError) and the facts given (``RunFacts``, each
        by name and type); tell on_change if anything changed."""
        changed = state is not None and state != self.state
        if state is not None:
            check_transition(self.state, state)
            self.state = state
        for k, v in facts.items():
            changed |= getattr(self, k) != v
            setattr(self, k, v)
        if changed:
            self.changed()

    def changed(self) -> None:
        """Tell on_change that something it shows changed."""
        if self.on_change is not None:
            try:
                self.on_change(self)
            except Exception:  # a subscriber's bug must not stop supervision
                log.exception("on_change callback failed")

    @property
    def dynamic(self) -> dict[str, Any]:
        return self.profile.dynamic  # a gateway's is empty: no speculation settings

    @property
    def exit_file(self) -> Path:
        return runs.exit_file(self.profile.name, self.state_dir)

    def load_disk(self) -> runs.RunRecord | None:
        """The run record; a missing or unreadable one of a live run is recovered from its
        keeper's start note (and said); an unreadable one that cannot be says what listens."""
        rec, note = run_recovery.load_or_recover(self.profile.name, self.state_dir, self.profile.port)
        if note:
            self.last_error = note
            log.warning("%s: %s", self.profile.name, note)
        return rec

    def processes(self) -> list[ProcInfo]:
        """The run's processes (server_control/supervision/run_processes.py)."""
        return self.procs.current()

    def status(self) -> RunStatus:
        rec = self.record
        return RunStatus(
            state=self.state,
            pid=rec.pid if rec else None,
            pgid=rec.pgid if rec else None,
            started_at=rec.started_at if rec else None,
            uptime_s=(round(rec.uptime_s, 1) if rec and self.state not in STOPPED_STATES else None),
            port=self.profile.port,
            restarts=self.restarts,
            log_path=rec.log_path if rec else None,
            exit_code=self.exit_code,
            fatal_reason=self.fatal_reason,
            processes=tuple(p.pid for p in self.processes()),
            supervising=self.supervising,
            last_error=self.last_error,
            next_restart_in_s=(round(max(0.0, self.next_restart_at - time.time()), 1) if self.next_restart_at else None),
            runtime=MappingProxyType(dict(rec.runtime) if rec else {}),
            runtime_note=self.runtime_note,
            supervisor=self.supervisor_of(),
            last_exit=self.last_exit,
            lost_supervisor=self.ownership.lost(),
            took_over_from=self.ownership.took_over_from,
        )

    def status_json(self) -> dict[str, Any]:
        """``status()`` as JSON (`specconsole supervise --json`)."""
        return self.status().to_json()

    # -- adopt ------------------------------------------------------------------------------
    def adopt(self) -> runs.RunRecord | None:
        """Take the run its record on disk names (found_run.py says in which state); the
        record when its server lives, else None."""
        rec = self.load_disk()
        if rec is None:
            return None
        live = self.procs.live(rec)
        if live:
            self.health_watch.fails = 0
        supervised = lambda: self.supervising or restart_lock.RestartLock.held_elsewhere(self.profile.name, self.state_dir)  # noqa: E731
        state, facts = found_run.reading(rec, live, self.exit_file, supervised, self.last_exit)
        self.update(state, **facts)
        return rec if live else None

    # -- launch -----------------------------------------------------------------------------
    async def launch(self, runtime: dict[str, Any] | None = None, unsupervised: bool = False) -> runs.RunRecord:
        """Start the server. ``runtime``: settings to re-apply once it is ready (a restart);
        ``unsupervised``: recorded, so that no console starts a supervisor for it."""
        async with self.op_lock:
            self.epoch += 1
            self.policy = RestartPolicy.from_profile(self.profile.restart)
            self.update(restarts=0, fatal_reason=None, fatal_tail=[], backoff_history=[], runtime_note=None, last_exit=None)
            try:
                return await self.start(previous_logs=[], runtime=runtime, unsupervised=unsupervised)
            except RunConflict as exc:
                self.journal("launch", Outcome.REFUSED, str(exc))
                raise
            except Exception as exc:
                self.journal("launch", Outcome.FAILED, str(exc))
                raise

    def journal(self, action: str, result: str, detail: str = "", **kw: Any) -> None:
        """One entry in the operator journal (server_control/state/journal.py) for this run."""
        journal.record(
            self.state_dir, action, target=self.profile.url, profile=self.profile.name, result=result, detail=detail, **kw
        )

    async def start(
        self, previous_logs: list[str], runtime: dict[str, Any] | None = None, unsupervised: bool = False
    ) -> runs.RunRecord:
        name, sd = self.profile.name, self.state_dir
        async with runs.profile_lock(name, sd), runs.port_lock(self.profile.port, sd):
            disk = self.load_disk()
            if disk is not None:
                if self.procs.live(disk):
                    raise RunConflict(
                        f"profile {name!r} is already running: pid {disk.pid} on "
                        f"{disk.host}:{disk.port} since {disk.started_at} (log {disk.log_path})",
                        disk,
                    )
                if identity.run_processes(disk.identity()):  # orphans of a dead run: clean them first
                    res = await process.stop_run(disk.identity(), self.profile.stop_grace_s, self.exit_file)
                    if not res.ok:
                        raise RuntimeError(f"cannot launch: {res.message}")
                runs.delete_record(name, sd, pid=disk.pid)
            other = runs.live_record_on_port(self.profile.port, sd, exclude=name)
            if other is not None:
                raise RunConflict(f"port {other.port} is held by the live run of profile {other.name!r} (pid {other.pid})", other)
            self.profile.check_port()
            spec = dataclasses.replace(self.profile.launch_spec(sd), exit_file=self.exit_file)
            keep = self.profile.restart["keep_logs"]
            carry = dict(runtime or {}) if self.profile.restart.get("reapply_runtime", True) else {}
            template = runs.RunRecord(  # the keeper fills in the server's identity and writes it
                name=name,
                profile_path=str(self.profile.path) if self.profile.path else None,
                kind=self.profile.kind,
                pid=0,
                create_time=0.0,
                pgid=0,
                sid=0,
                argv=spec.masked_argv(),
                host=self.profile.host,
                port=self.profile.port,
                log_path="",
                cwd=str(spec.cwd),
                started_at="",
                restarts=self.restarts,
                launcher_pid=os.getpid(),
                log_paths=previous_logs[-(keep - 1) :] if keep > 1 else [],
                supervisor=self.ownership.info() if self.supervising else None,
                runtime=carry,
                runtime_pending=bool(carry),
                last_exit=self.last_exit,
                unsupervised=unsupervised,
            )
            manifest = runs.log_manifest(name, sd)
            started = await asyncio.to_thread(
                process.launch, spec, dataclasses.asdict(template), runs.record_path(name, sd), manifest
            )
            self.procs.launched(started.pid, started.create_time)
            rec = runs.RunRecord.from_dict(started.record or {}, "the keeper's run record")
            try:
                run_logs.prune_listed(manifest, keep, protect=(started.log_path,))
            except OSError as exc:
                log.warning("%s: old logs not pruned: %s", name, exc)
        self.policy.record_start(time.monotonic())
        self.health_watch.fails = 0
        self.procs.forget()
        self.journal(
            "launch", Outcome.DONE, f"pid {rec.pid}, log {rec.log_path}" + (f", restart {self.restarts}" if self.restarts else "")
        )
        if runtime and not carry:
            self.update(runtime_note=not_reapplied(runtime, self.dynamic))
            log.warning("%s: %s", name, self.runtime_note)
        self.update(RunState.STARTING, record=rec, exit_code=None, last_error=None, health_error=None, next_restart_at=None)
        return rec

    # -- stop / restart ---------------------------------------------------------------------
    async def stop(self, grace: float | None = None, keeping_runtime: bool = False) -> StopResult:
        """Stop the run; its runtime settings end with it, said, unless ``keeping_runtime`` (a restart)."""
        async with self.op_lock:
            self.epoch += 1
            grace = self.profile.stop_grace_s if grace is None else grace
            name, sd = self.profile.name, self.state_dir
            mark_error = ""
            async with runs.profile_lock(name, sd):
                rec = self.record
                disk = self.load_disk()
                if disk is not None and (rec is None or disk.pid == rec.pid):
                    disk.stopping = True
                    rec = disk
                    try:
                        runs.save_record(disk, sd)
                    except OSError as exc:  # a full disk: stop it anyway, and say so
                        mark_error = f"could not mark the record stopping ({exc.strerror or exc})"
            if rec is None:
                self.update(RunState.STOPPED, next_restart_at=None)
                if self.last_error and run_recovery.STILL_LISTENING in self.last_error:
                    return StopResult(
                        ok=False,
                        was_running=True,
                        message=(
                            f"NOT stopped: {self.last_error} (without a readable record nothing is signalled: "
                            "check that process and stop it by hand)"
                        ),
                    )
                return StopResult(ok=True, was_running=False, message="not running")
            self.procs.live(rec)  # a title it took since it was last seen
            res = await process.stop_run(rec.identity(), grace, self.exit_file)
            if mark_error:
                res.message += f"; {mark_error}"
            if res.ok and rec.runtime and not keeping_runtime:
                res.message += f"; {ended_with_the_run(dict(rec.runtime), self.dynamic)}"
            self.journal("stop", Outcome.DONE if res.ok else Outcome.FAILED, f"pid {rec.pid}: {res.message}")
            if res.ok:
                async with runs.profile_lock(name, sd):
                    try:
                        runs.delete_record(name, sd, pid=rec.pid)
                    except OSError as exc:
                        res.message += f"; the run record could not be removed ({exc.strerror or exc})"
                self.update(RunState.STOPPED, record=None, exit_code=res.exit_code, next_restart_at=None, last_error=None)
                ended = None if keeping_runtime else await asyncio.to_thread(self.ownership.end_run_supervisor, rec)
                if ended is not None:  # a restart's stop leaves it: it follows the new server
                    res.message += f"; its supervisor (pid {ended}) ended"
            else:
                self.update(RunState.STOPPED, exit_code=res.exit_code, last_error=res.message)
            return res

    async def restart(self) -> runs.RunRecord:
        """Stop, then launch; settings changed at runtime are re-applied to the new server."""
        carry = self.current_runtime()
        bare = self.record is not None and self.record.unsupervised  # launched --no-supervise: it stays so
        res = await self.stop(keeping_runtime=True)
        if not res.ok:
            raise RuntimeError(f"restart aborted: {res.message}")
        return await self.launch(runtime=carry, unsupervised=bare)

    async def wait_ready(self, timeout: float) -> RunState:
        """Probe health until ready (no restarts): ready, crashed or starting (timeout)."""
        return await self.health_watch.wait_ready(timeout)

    # -- the parts' public faces ------------------------------------------------------------
    async def watch(self) -> None:
        """Supervise until cancelled (server_control/supervision/health_watch.py)."""
        await self.health_watch.watch()

    def poll_answered(self, started: float, next_poll_s: float) -> None:
        self.health_watch.poll_answered(started, next_poll_s)  # stands in for health checks

    @property
    def supervising(self) -> bool:
        """This process holds the run's restart lock (server_control/supervision/ownership.py)."""
        return self.ownership.supervising

    def supervisor_of(self) -> SupervisorInfo | None:
        return self.ownership.of()

    def current_runtime(self) -> dict[str, Any]:
        """Settings changed at runtime (server_control/supervision/carried_settings.py)."""
        return self.carried.current()

    async def remember_runtime(self, key: str, value: object) -> str | None:
        return await self.carried.remember(key, value)
