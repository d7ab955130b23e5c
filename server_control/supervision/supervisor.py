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
the record ``stopping`` first, so a supervisor elsewhere reports "stopped", not a crash.
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
from typing import Any

import httpx
import psutil

from server_control.model.run_status import RunStatus, SupervisorInfo
from server_control.model.vocabulary import STOPPED_STATES, Outcome, RunState, check_transition
from server_control.proc import process
from server_control.proc.process import ProcInfo, StopResult
from server_control.state import identity, journal, run_logs, run_recovery, runs
from server_control.state.runs import RunConflict
from server_control.state.start_ticks import proc_start
from server_control.state.state_dir import resolve_state_dir
from server_control.supervision import carried_settings
from server_control.supervision.health_watch import TAIL_LINES, WatchLoop, exit_words
from server_control.supervision.ownership import SupervisorRole
from server_control.supervision.restart_policy import RestartPolicy
from server_control.supervision.supervised import SupervisedProfile

log = logging.getLogger(__name__)
MAX_MEMBERS = 512
KEEPER_GONE = "the run's keeper is gone"


class Supervisor(WatchLoop, carried_settings.RuntimeSettings, SupervisorRole):
    def __init__(self, profile: SupervisedProfile, state_dir: str | Path | None = None,
                 on_change: Callable[[Supervisor], None] | None = None, role: str = "console") -> None:
        self.profile = profile
        self.state_dir = resolve_state_dir(state_dir)
        self.on_change = on_change
        self.role = role
        self.state = RunState.STOPPED
        self.restarts = 0
        self.record: runs.RunRecord | None = None
        self.exit_code: int | None = None
        self.fatal_reason: str | None = None
        self.fatal_tail: list[str] = []
        self.last_error: str | None = None
        self.health_error: str | None = None
        self.backoff_history: list[float] = []
        self.next_restart_at: float | None = None   # time.time() of the pending restart
        self.runtime_note: str | None = None   # what became of the runtime settings at the last restart
        self.supervising = False
        self.policy = RestartPolicy.from_profile(profile.restart)
        self._epoch = 0            # bumped by launch/stop: a pending restart of an old epoch aborts
        self._op_lock = asyncio.Lock()
        self._lock = None
        self._fails = 0
        self._procs_cache: tuple[float, list[ProcInfo]] = (0.0, [])
        self._seen: set[tuple[int, float]] = set()   # leaders this process launched or verified
        self._sup_cache: tuple[float, SupervisorInfo | None] = (0.0, None)

    # -- state ------------------------------------------------------------------------------
    def _set(self, state: RunState | None = None, **attrs: Any) -> None:
        """Set the run state (checked against vocabulary.TRANSITIONS: a change the state
        machine does not allow raises TransitionError) and other attributes; tell on_change."""
        changed = state is not None and state != self.state
        if state is not None:
            check_transition(self.state, state)
            self.state = state
        for k, v in attrs.items():
            changed |= getattr(self, k) != v
            setattr(self, k, v)
        if changed and self.on_change is not None:
            try:
                self.on_change(self)
            except Exception:  # a subscriber's bug must not stop supervision
                log.exception("on_change callback failed")

    @property
    def _dynamic(self) -> dict[str, Any]:
        return self.profile.dynamic   # a gateway's is empty: no speculation settings

    @property
    def exit_file(self) -> Path:
        return runs.exit_file(self.profile.name, self.state_dir)

    def _load_disk(self) -> runs.RunRecord | None:
        """The run record; a missing or unreadable one of a live run is recovered from its
        keeper's start note (and said); an unreadable one that cannot be says what listens."""
        rec, note = run_recovery.load_or_recover(self.profile.name, self.state_dir, self.profile.port)
        if note:
            self.last_error = note
            log.warning("%s: %s", self.profile.name, note)
        return rec

    def _live(self, rec: runs.RunRecord) -> bool:
        """Is the record's leader running? Verified by pid + start time + command line; a
        leader this process launched or verified before may have retitled itself (smg's
        ``smg::router``): its new title is recorded so that other processes know it too."""
        key = (rec.pid, rec.create_time)
        if rec.leader() is not None:
            self._seen.add(key)
            if rec.start is None:
                self._record_start(rec)
            return True
        if key not in self._seen or (p := identity.retitled_leader(rec.identity())) is None:
            return False
        try:
            t = identity.title(p.cmdline())
        except psutil.Error:
            return False
        if t not in rec.titles:
            rec.titles.append(t)
            runs.try_update_record(self.profile.name, self.state_dir, rec.pid,
                                   lambda r: r.titles.append(t) if t not in r.titles else None)
        return True

    def _record_start(self, rec: runs.RunRecord) -> None:
        """An earlier version's record names its verified leader by epoch start time only,
        which steps of the wall clock move: add its clock-independent start."""
        start = proc_start(rec.pid)
        if start is None:
            return

        def add(r: runs.RunRecord) -> None:
            if r.create_time == rec.create_time and r.start is None:
                r.boot_id, r.start_ticks = start.boot_id, start.ticks
        rec.boot_id, rec.start_ticks = start.boot_id, start.ticks
        runs.try_update_record(self.profile.name, self.state_dir, rec.pid, add)

    def processes(self) -> list[ProcInfo]:
        rec = self.record
        if rec is None:
            return []
        now = time.monotonic()
        if now - self._procs_cache[0] > 1.0:
            self._live(rec)
            procs = identity.run_processes(rec.identity())
            self._procs_cache = (now, process.describe(procs))
            self._remember_members(rec, procs)
            if any(p.pid == rec.pid for p in procs) and rec.keeper_gone() and not (
                    self.last_error or "").startswith(KEEPER_GONE):
                self.last_error = (f"{KEEPER_GONE} (pid {rec.keeper_pid}) while the server runs: its log no "
                                   "longer grows (the log view and the verification are blind from now on) and "
                                   "its exit code will not be known; restart the run to get them back")
                log.warning("%s: %s", self.profile.name, self.last_error)
        return self._procs_cache[1]

    def _remember_members(self, rec: runs.RunRecord, procs: list[psutil.Process]) -> None:
        """Record the run's other processes while its leader is verified: after the leader is
        gone they are the only way to tell its orphaned ranks from strangers. Rewritten when
        one is new, or was recorded without start ticks (an earlier version's record)."""
        if not any(p.pid == rec.pid for p in procs):
            return
        fresh = [[pid, ct, ticks] for pid, ct, ticks in identity.member_pairs(procs, rec.pid)][-MAX_MEMBERS:]
        known = {(int(m[0]), m[2] if len(m) > 2 else None) for m in rec.members}
        if all((m[0], m[2]) in known for m in fresh):
            return

        def merge(r: runs.RunRecord) -> None:
            r.members = fresh
        saved = runs.try_update_record(self.profile.name, self.state_dir, rec.pid, merge)
        if saved is not None and self.record is rec:
            self.record = saved

    def status(self) -> RunStatus:
        rec = self.record
        return RunStatus(
            state=self.state, pid=rec.pid if rec else None, pgid=rec.pgid if rec else None,
            started_at=rec.started_at if rec else None,
            uptime_s=(round(rec.uptime_s, 1) if rec and self.state not in STOPPED_STATES else None),
            port=self.profile.port, restarts=self.restarts, log_path=rec.log_path if rec else None,
            exit_code=self.exit_code, fatal_reason=self.fatal_reason,
            processes=tuple(p.pid for p in self.processes()), supervising=self.supervising,
            last_error=self.last_error,
            next_restart_in_s=(round(max(0.0, self.next_restart_at - time.time()), 1)
                               if self.next_restart_at else None),
            runtime=MappingProxyType(dict(rec.runtime) if rec else {}), runtime_note=self.runtime_note,
            supervisor=self.supervisor_of())

    def status_json(self) -> dict[str, Any]:
        """``status()`` as JSON (`specconsole supervise --json`)."""
        return self.status().to_json()

    # -- adopt ------------------------------------------------------------------------------
    def adopt(self) -> runs.RunRecord | None:
        rec = self._load_disk()
        if rec is None:
            return None
        if self._live(rec):
            self._fails = 0
            self._set(RunState.UNHEALTHY if rec.health == RunState.UNHEALTHY else RunState.STARTING, record=rec,
                      restarts=rec.restarts, exit_code=None, fatal_reason=None, last_error=None)
            return rec
        left = identity.run_processes(rec.identity())
        if left:
            names = "; ".join(f"pid {p.pid}: {p.cmdline}" for p in process.describe(left))
            self._set(RunState.CRASHED, record=rec, last_error=(
                f"server pid {rec.pid} is gone but {len(left)} process(es) of its run remain "
                f"({names}); stop or launch cleans them up"))
            return None
        if rec.fatal_reason:    # kept for the next console, which reads the reason once
            self._set(RunState.FATAL, record=rec, fatal_reason=rec.fatal_reason, exit_code=rec.exit_code,
                      restarts=rec.restarts, fatal_tail=run_logs.tail_lines(rec.log_path, TAIL_LINES))
            if not self.supervising and not runs.RestartLock.held_elsewhere(self.profile.name, self.state_dir):
                runs.delete_record(self.profile.name, self.state_dir, pid=rec.pid)
            return None
        code = process.exit_status(self.exit_file, rec.pid, rec.create_time, wait_s=0)
        if self.supervising or runs.RestartLock.held_elsewhere(self.profile.name, self.state_dir):
            who = "the process supervising it restarts it"
        else:
            who = "nobody supervises it: `specconsole launch` or `supervise` starts it again"
        self._set(RunState.CRASHED, record=rec, exit_code=code, restarts=rec.restarts,
                  last_error=f"server pid {rec.pid} exited ({exit_words(code)}); {who}")
        return None

    # -- launch -----------------------------------------------------------------------------
    async def launch(self, runtime: dict[str, Any] | None = None) -> runs.RunRecord:
        """Start the server. ``runtime``: settings to re-apply once it is ready (a restart)."""
        async with self._op_lock:
            self._epoch += 1
            self.policy = RestartPolicy.from_profile(self.profile.restart)
            self._set(restarts=0, fatal_reason=None, fatal_tail=[], backoff_history=[], runtime_note=None)
            try:
                return await self._start(previous_logs=[], runtime=runtime)
            except RunConflict as exc:
                self.journal("launch", Outcome.REFUSED, str(exc))
                raise
            except Exception as exc:
                self.journal("launch", Outcome.FAILED, str(exc))
                raise

    def journal(self, action: str, result: str, detail: str = "", **kw: Any) -> None:
        """One entry in the operator journal (server_control/state/journal.py) for this run."""
        journal.record(self.state_dir, action, target=self.profile.url, profile=self.profile.name,
                       result=result, detail=detail, **kw)

    async def _start(self, previous_logs: list[str], runtime: dict[str, Any] | None = None) -> runs.RunRecord:
        name, sd = self.profile.name, self.state_dir
        async with runs.profile_lock(name, sd), runs.port_lock(self.profile.port, sd):
            disk = self._load_disk()
            if disk is not None:
                if self._live(disk):
                    raise RunConflict(f"profile {name!r} is already running: pid {disk.pid} on "
                                      f"{disk.host}:{disk.port} since {disk.started_at} (log {disk.log_path})",
                                      disk)
                if identity.run_processes(disk.identity()):   # orphans of a dead run: clean them first
                    res = await process.stop_run(disk.identity(), self.profile.stop_grace_s, self.exit_file)
                    if not res.ok:
                        raise RuntimeError(f"cannot launch: {res.message}")
                runs.delete_record(name, sd, pid=disk.pid)
            other = runs.live_record_on_port(self.profile.port, sd, exclude=name)
            if other is not None:
                raise RunConflict(f"port {other.port} is held by the live run of profile {other.name!r} "
                                  f"(pid {other.pid})", other)
            self.profile.check_port()
            spec = dataclasses.replace(self.profile.launch_spec(sd), exit_file=self.exit_file)
            keep = self.profile.restart["keep_logs"]
            carry = dict(runtime or {}) if self.profile.restart.get("reapply_runtime", True) else {}
            template = runs.RunRecord(   # the keeper fills in the server's identity and writes it
                name=name, profile_path=str(self.profile.path) if self.profile.path else None,
                kind=self.profile.kind, pid=0, create_time=0.0, pgid=0, sid=0, argv=spec.masked_argv(),
                host=self.profile.host, port=self.profile.port, log_path="", cwd=str(spec.cwd),
                started_at="", restarts=self.restarts,
                launcher_pid=os.getpid(), log_paths=previous_logs[-(keep - 1):] if keep > 1 else [],
                supervisor=self.supervisor_info() if self.supervising else None,
                runtime=carry, runtime_pending=bool(carry))
            manifest = runs.log_manifest(name, sd)
            started = await asyncio.to_thread(process.launch, spec, dataclasses.asdict(template),
                                              runs.record_path(name, sd), manifest)
            self._seen.add((started.pid, started.create_time))
            rec = runs.RunRecord.from_dict(started.record or {}, "the keeper's run record")
            try:
                run_logs.prune_listed(manifest, keep, protect=(started.log_path,))
            except OSError as exc:
                log.warning("%s: old logs not pruned: %s", name, exc)
        self.policy.record_start(time.monotonic())
        self._fails = 0
        self._procs_cache = (0.0, [])
        self.journal("launch", Outcome.DONE, f"pid {rec.pid}, log {rec.log_path}"
                     + (f", restart {self.restarts}" if self.restarts else ""))
        if runtime and not carry:
            self._set(runtime_note=carried_settings.not_reapplied(runtime, self._dynamic))
            log.warning("%s: %s", name, self.runtime_note)
        self._set(RunState.STARTING, record=rec, exit_code=None, last_error=None, health_error=None,
                  next_restart_at=None)
        return rec

    # -- stop / restart ---------------------------------------------------------------------
    async def stop(self, grace: float | None = None) -> StopResult:
        async with self._op_lock:
            self._epoch += 1
            grace = self.profile.stop_grace_s if grace is None else grace
            name, sd = self.profile.name, self.state_dir
            mark_error = ""
            async with runs.profile_lock(name, sd):
                rec = self.record
                disk = self._load_disk()
                if disk is not None and (rec is None or disk.pid == rec.pid):
                    disk.stopping = True
                    rec = disk
                    try:
                        runs.save_record(disk, sd)
                    except OSError as exc:   # a full disk: stop it anyway, and say so
                        mark_error = f"could not mark the record stopping ({exc.strerror or exc})"
            if rec is None:
                self._set(RunState.STOPPED, next_restart_at=None)
                if self.last_error and run_recovery.STILL_LISTENING in self.last_error:
                    return StopResult(ok=False, was_running=True, message=(
                        f"NOT stopped: {self.last_error} (without a readable record nothing is signalled: "
                        "check that process and stop it by hand)"))
                return StopResult(ok=True, was_running=False, message="not running")
            self._live(rec)   # a title it took since it was last seen
            res = await process.stop_run(rec.identity(), grace, self.exit_file)
            if mark_error:
                res.message += f"; {mark_error}"
            self.journal("stop", Outcome.DONE if res.ok else Outcome.FAILED, f"pid {rec.pid}: {res.message}")
            if res.ok:
                async with runs.profile_lock(name, sd):
                    try:
                        runs.delete_record(name, sd, pid=rec.pid)
                    except OSError as exc:
                        res.message += f"; the run record could not be removed ({exc.strerror or exc})"
                self._set(RunState.STOPPED, record=None, exit_code=res.exit_code, next_restart_at=None,
                          last_error=None)
            else:
                self._set(RunState.STOPPED, exit_code=res.exit_code, last_error=res.message)
            return res

    async def restart(self) -> runs.RunRecord:
        """Stop, then launch; settings changed at runtime are re-applied to the new server."""
        carry = self.current_runtime()
        res = await self.stop()
        if not res.ok:
            raise RuntimeError(f"restart aborted: {res.message}")
        return await self.launch(runtime=carry)

    async def wait_ready(self, timeout: float) -> RunState:
        """Probe health until ready (no restarts); returns the state reached: ready, crashed
        (the server exited first) or starting (timeout)."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(trust_env=False, timeout=self.profile.health["timeout_s"]) as c:
            while self.record is not None:
                dead, code = await self._exit_status()
                if dead:
                    self._set(RunState.CRASHED, exit_code=code, last_error=f"server exited before ready: {exit_words(code)}")
                    break
                await self._probe(c)
                if self.state == RunState.READY:
                    self._procs_cache = (0.0, [])
                    self.processes()   # records the run's members now that they all run
                    await self.reapply_runtime()
                    break
                if time.monotonic() >= deadline:
                    break
                await asyncio.sleep(min(0.25, self.profile.health["interval_s"]))
        return self.state

    async def _exit_status(self) -> tuple[bool, int | None]:
        """(dead, exit code or None) for the current record's server process."""
        rec = self.record
        if rec is None or self._live(rec):
            return False, None
        code = await asyncio.to_thread(process.exit_status, self.exit_file, rec.pid, rec.create_time)
        return True, code
