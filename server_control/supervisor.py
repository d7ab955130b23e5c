"""One server run of one profile: launch, adopt, watch (health + crash restart), stop.

API (used by server_control.session and the headless commands)::

    profile = load_profile(path)                       # server_control.profile
    sup = Supervisor(profile, state_dir=None, on_change=callback)   # callback(sup), sync
    rec = sup.adopt()          # RunRecord of a live run of this profile, or None.
                               # Live = pid AND process start time match. A dead record is
                               # removed; leftover processes of it are named in sup.last_error
                               # and stopped by the next launch()/stop().
    rec = await sup.launch()   # RunConflict if a live run holds this profile or its port;
                               # ProfileError (file + key) for a busy port / bad profile.
    await sup.watch()          # supervision loop; runs until cancelled. Health: GET
                               # <url><[health] path> every [health] interval_s. Crash restart
                               # only while this process holds the profile's restart lock
                               # (sup.supervising); a second console only observes.
    res = await sup.stop(grace=None)   # -> process.StopResult (ok, remaining [(pid, cmdline)])
    rec = await sup.restart()          # stop + launch
    sup.state        # starting | ready | unhealthy | crashed | stopped | fatal
    sup.restarts, sup.record, sup.exit_code, sup.fatal_reason, sup.fatal_tail (last 50 lines),
    sup.last_error, sup.backoff_history, sup.processes() -> [ProcInfo], sup.snapshot() -> dict
    (the "run" part of the session snapshot, docs/architecture.md).

Exit codes come from Popen.poll() when this process launched the server; for an adopted one
they are unknown (None; last_error says so). `stop` marks the record ``stopping`` first, so a
supervisor elsewhere reports "stopped", not a crash; a run launched elsewhere is adopted.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Callable

import httpx

from server_control import process, runs
from server_control.process import ProcInfo, StopResult
from server_control.profile import Profile
from server_control.restart_policy import RestartPolicy
from server_control.runs import RunConflict, iso_time

log = logging.getLogger(__name__)

STARTING, READY, UNHEALTHY, CRASHED, STOPPED, FATAL = (
    "starting", "ready", "unhealthy", "crashed", "stopped", "fatal")
STATES = (STARTING, READY, UNHEALTHY, CRASHED, STOPPED, FATAL)
TAIL_LINES = 50
IDLE_POLL_S = 1.0


class Supervisor:
    def __init__(self, profile: Profile, state_dir=None,
                 on_change: Callable[["Supervisor"], None] | None = None):
        self.profile = profile
        self.state_dir = runs.resolve_state_dir(state_dir)
        self.on_change = on_change
        self.state = STOPPED
        self.restarts = 0
        self.record: runs.RunRecord | None = None
        self.exit_code: int | None = None
        self.fatal_reason: str | None = None
        self.fatal_tail: list[str] = []
        self.last_error: str | None = None
        self.health_error: str | None = None
        self.backoff_history: list[float] = []
        self.next_restart_at: float | None = None   # time.time() of the pending restart
        self.supervising = False
        self.policy = RestartPolicy.from_profile(profile.restart)
        self._popen = None
        self._epoch = 0            # bumped by launch/stop: a pending restart of an old epoch aborts
        self._op_lock = asyncio.Lock()
        self._lock: runs.RestartLock | None = None
        self._fails = 0
        self._procs_cache: tuple[float, list[ProcInfo]] = (0.0, [])

    # -- state ------------------------------------------------------------------------------
    def _set(self, state: str | None = None, **attrs) -> None:
        changed = state is not None and state != self.state
        if state is not None:
            self.state = state
        for k, v in attrs.items():
            changed |= getattr(self, k) != v
            setattr(self, k, v)
        if changed and self.on_change is not None:
            try:
                self.on_change(self)
            except Exception:  # a subscriber's bug must not stop supervision
                log.exception("on_change callback failed")

    def _ident(self, rec: runs.RunRecord) -> tuple[int, int, int, float]:
        return rec.pid, rec.pgid, rec.sid, rec.create_time

    def _load_disk(self) -> runs.RunRecord | None:
        try:
            return runs.load_record(self.profile.name, self.state_dir)
        except runs.RunRecordError as exc:
            runs.quarantine_record(self.profile.name, self.state_dir)
            self.last_error = f"unreadable run record moved aside: {exc}"
            return None

    def processes(self) -> list[ProcInfo]:
        rec = self.record
        if rec is None:
            return []
        now = time.monotonic()
        if now - self._procs_cache[0] > 1.0:
            self._procs_cache = (now, process.describe(process.run_processes(*self._ident(rec))))
        return self._procs_cache[1]

    def snapshot(self) -> dict:
        rec = self.record
        return {
            "state": self.state, "pid": rec.pid if rec else None, "pgid": rec.pgid if rec else None,
            "started_at": rec.started_at if rec else None,
            "uptime_s": (round(rec.uptime_s, 1) if rec and self.state not in (STOPPED, FATAL, CRASHED)
                         else None),
            "port": self.profile.port, "restarts": self.restarts,
            "log_path": rec.log_path if rec else None, "exit_code": self.exit_code,
            "fatal_reason": self.fatal_reason, "processes": [p.pid for p in self.processes()],
            "supervising": self.supervising, "last_error": self.last_error,
            "next_restart_in_s": (round(max(0.0, self.next_restart_at - time.time()), 1)
                                  if self.next_restart_at else None),
        }

    # -- adopt ------------------------------------------------------------------------------
    def adopt(self) -> runs.RunRecord | None:
        rec = self._load_disk()
        if rec is None:
            return None
        if rec.is_live():
            self._popen = None
            self._fails = 0
            self._set(STARTING, record=rec, restarts=rec.restarts, exit_code=None,
                      fatal_reason=None, last_error=None)
            return rec
        left = process.run_processes(*self._ident(rec))
        if left:
            names = "; ".join(f"pid {p.pid}: {p.cmdline}" for p in process.describe(left))
            self._set(CRASHED, record=rec, last_error=(
                f"server pid {rec.pid} is gone but {len(left)} process(es) of its run remain "
                f"({names}); stop or launch cleans them up"))
            return None
        if rec.fatal_reason:
            self._set(FATAL, fatal_reason=rec.fatal_reason, exit_code=rec.exit_code, restarts=rec.restarts,
                      fatal_tail=process.tail_lines(rec.log_path, TAIL_LINES))
        lock = None if self.supervising else runs.RestartLock.acquire(self.profile.name, self.state_dir)
        if lock is None and not self.supervising:   # its supervisor is about to restart it
            if rec.fatal_reason:
                self._set(record=rec)
            else:
                self._set(CRASHED, record=rec, last_error=f"server pid {rec.pid} exited; "
                          "the console supervising it restarts it")
            return None
        if lock is not None:
            lock.release()
        runs.delete_record(self.profile.name, self.state_dir, pid=rec.pid)
        return None

    # -- launch -----------------------------------------------------------------------------
    async def launch(self) -> runs.RunRecord:
        async with self._op_lock:
            self._epoch += 1
            self.policy = RestartPolicy.from_profile(self.profile.restart)
            self._set(restarts=0, fatal_reason=None, fatal_tail=[], backoff_history=[])
            return await self._start(previous_logs=[])

    async def _start(self, previous_logs: list[str]) -> runs.RunRecord:
        name, sd = self.profile.name, self.state_dir
        disk = self._load_disk()
        if disk is not None:
            if disk.is_live():
                raise RunConflict(f"profile {name!r} is already running: pid {disk.pid} on "
                                  f"{disk.host}:{disk.port} since {disk.started_at} (log {disk.log_path})",
                                  disk)
            left = process.run_processes(*self._ident(disk))
            if left:  # orphans of a dead run hold the port / GPUs: clean them first
                res = await process.stop_run(*self._ident(disk), grace_s=self.profile.stop_grace_s)
                if not res.ok:
                    raise RuntimeError(f"cannot launch: {res.message}")
            runs.delete_record(name, sd, pid=disk.pid)
        other = runs.live_record_on_port(self.profile.port, sd, exclude=name)
        if other is not None:
            raise RunConflict(f"port {other.port} is held by the live run of profile {other.name!r} "
                              f"(pid {other.pid})", other)
        self.profile.check_port()
        spec = self.profile.launch_spec(sd)
        started = process.launch(spec)
        keep = self.profile.restart["keep_logs"]
        rec = runs.RunRecord(
            name=name, profile_path=str(self.profile.path) if self.profile.path else None,
            kind=self.profile.kind, pid=started.pid, create_time=started.create_time,
            pgid=started.pgid, sid=started.sid, argv=spec.masked_argv(), host=self.profile.host,
            port=self.profile.port, log_path=str(started.log_path), cwd=str(spec.cwd),
            started_at=iso_time(started.create_time), restarts=self.restarts,
            launcher_pid=os.getpid(), log_paths=previous_logs[-(keep - 1):] if keep > 1 else [])
        runs.save_record(rec, sd)
        process.prune_logs(started.log_path.parent, keep, protect=(started.log_path,))
        self.policy.record_start(time.monotonic())
        self._popen = started.popen
        self._fails = 0
        self._procs_cache = (0.0, [])
        self._set(STARTING, record=rec, exit_code=None, last_error=None, health_error=None,
                  next_restart_at=None)
        return rec

    # -- stop / restart ---------------------------------------------------------------------
    async def stop(self, grace: float | None = None) -> StopResult:
        async with self._op_lock:
            self._epoch += 1
            grace = self.profile.stop_grace_s if grace is None else grace
            rec = self.record or self._load_disk()
            disk = self._load_disk()
            if disk is not None and (rec is None or disk.pid == rec.pid):
                disk.stopping = True
                runs.save_record(disk, self.state_dir)
                rec = disk
            if rec is None:
                self._set(STOPPED, next_restart_at=None)
                return StopResult(ok=True, was_running=False, message="not running")
            popen = self._popen if self._popen is not None and self._popen.pid == rec.pid else None
            res = await process.stop_run(*self._ident(rec), grace_s=grace, popen=popen)
            if res.ok:
                runs.delete_record(self.profile.name, self.state_dir, pid=rec.pid)
                self._popen = None
                self._set(STOPPED, record=None, exit_code=res.exit_code, next_restart_at=None,
                          last_error=None)
            else:
                self._set(STOPPED, exit_code=res.exit_code, last_error=res.message)
            return res

    async def restart(self) -> runs.RunRecord:
        res = await self.stop()
        if not res.ok:
            raise RuntimeError(f"restart aborted: {res.message}")
        return await self.launch()

    async def wait_ready(self, timeout: float) -> str:
        """Probe health until ready (no restarts); returns the state reached: ready, crashed
        (the server exited first) or starting (timeout)."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(trust_env=False, timeout=self.profile.health["timeout_s"]) as c:
            while self.record is not None:
                dead, code = self._exit_status()
                if dead:
                    how = f"exit code {code}" if code is not None else "exit code unknown"
                    self._set(CRASHED, exit_code=code, last_error=f"server exited before ready: {how}")
                    break
                await self._probe(c)
                if self.state == READY or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(min(0.25, self.profile.health["interval_s"]))
        return self.state

    # -- watch ------------------------------------------------------------------------------
    def _try_lock(self) -> None:
        if self._lock is None:
            self._lock = runs.RestartLock.acquire(self.profile.name, self.state_dir)
            if self._lock is not None:
                self._set(supervising=True)

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self._set(supervising=False)

    def _exit_status(self) -> tuple[bool, int | None]:
        """(dead, exit code or None) for the current record's server process."""
        rec = self.record
        if self._popen is not None and rec is not None and self._popen.pid == rec.pid:
            rc = self._popen.poll()
            return rc is not None, rc
        return (not rec.is_live()) if rec else False, None

    async def watch(self) -> None:
        hl = self.profile.health
        tick = min(0.25, hl["interval_s"])
        next_probe = 0.0
        client = httpx.AsyncClient(trust_env=False, timeout=hl["timeout_s"])
        try:
            while True:
                self._try_lock()
                if self.record is None or self.state in (STOPPED, FATAL) or (
                        self.state == CRASHED and not self.supervising):
                    await self._idle()
                    continue
                dead, code = self._exit_status()
                if dead:
                    await self._on_exit(code)
                    next_probe = 0.0
                    continue
                if time.monotonic() >= next_probe:
                    next_probe = time.monotonic() + hl["interval_s"]
                    await self._probe(client)
                await asyncio.sleep(tick)
        finally:
            await client.aclose()
            self._unlock()

    async def _idle(self) -> None:
        """No live run of ours: adopt one launched elsewhere (e.g. `specconsole restart`)."""
        disk = self._load_disk()
        mine = self.record
        if disk is not None and disk.is_live() and not disk.stopping and (
                mine is None or disk.pid != mine.pid):
            self.adopt()
            return
        await asyncio.sleep(IDLE_POLL_S)

    async def _probe(self, client: httpx.AsyncClient) -> None:
        url = self.profile.url + self.profile.health["path"]
        try:
            r = await client.get(url)
            ok, why = r.status_code == 200, f"HTTP {r.status_code}"
        except (httpx.HTTPError, OSError) as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        if self.state not in (STARTING, READY, UNHEALTHY):
            return
        if ok:
            self._fails = 0
            self._set(READY, health_error=None)
            return
        self._fails += 1
        self._set(health_error=f"GET {url}: {why}")
        if self.state == READY and self._fails >= self.profile.health["failures"]:
            self._set(UNHEALTHY)

    async def _on_exit(self, code: int | None) -> None:
        rec = self.record
        assert rec is not None
        if self._op_lock.locked():      # our own stop/launch is in progress
            await asyncio.sleep(0.05)
            return
        disk = self._load_disk()
        if disk is None or disk.stopping:
            self._popen = None
            self._set(STOPPED, record=None, exit_code=code)
            return
        if disk.pid != rec.pid and disk.is_live():
            self.adopt()
            return
        how = f"exit code {code}" if code is not None else "exit code unknown (adopted process)"
        self._set(CRASHED, exit_code=code, last_error=f"server pid {rec.pid} exited: {how}")
        if not self.supervising:
            return
        if process.run_processes(*self._ident(rec)):   # orphaned ranks still hold GPUs/ports
            res = await process.stop_run(*self._ident(rec), grace_s=self.profile.stop_grace_s)
            if not res.ok:
                self._set(last_error=f"server pid {rec.pid} exited: {how}; {res.message}")
        decision, value = self.policy.after_crash(time.monotonic(), ran_for_s=rec.uptime_s)
        if decision == "fatal":
            rec.exit_code, rec.fatal_reason = code, f"{value}; last {how}"
            runs.save_record(rec, self.state_dir)
            self._popen = None
            self._set(FATAL, fatal_reason=rec.fatal_reason,
                      fatal_tail=process.tail_lines(rec.log_path, TAIL_LINES))
            return
        await self._restart_after(float(value), rec)

    async def _restart_after(self, delay: float, dead: runs.RunRecord) -> None:
        epoch = self._epoch
        while True:
            self.backoff_history.append(delay)
            self._set(next_restart_at=time.time() + delay)
            await asyncio.sleep(delay)
            async with self._op_lock:
                if epoch != self._epoch:     # stopped or relaunched meanwhile
                    return
                disk = self._load_disk()
                if disk is None or disk.stopping:      # stopped from elsewhere meanwhile
                    self._set(STOPPED, record=None, next_restart_at=None)
                    return
                if disk.pid != dead.pid and disk.is_live():   # relaunched elsewhere
                    self._set(next_restart_at=None)
                    self.adopt()
                    return
                self.restarts += 1
                try:
                    await self._start(previous_logs=[*dead.log_paths, dead.log_path])
                    return
                except RunConflict as exc:   # someone else relaunched it: adopt theirs
                    self.restarts -= 1
                    self._set(last_error=str(exc), next_restart_at=None)
                    self.adopt()
                    return
                except Exception as exc:     # busy port, bad python...: counts as a failed start
                    self.policy.record_start(time.monotonic())
                    self._set(CRASHED, next_restart_at=None, last_error=f"restart failed: {exc}")
                    decision, value = self.policy.after_crash(time.monotonic())
                    if decision == "fatal":
                        self._set(FATAL, fatal_reason=f"{value}; last start failed: {exc}",
                                  fatal_tail=process.tail_lines(dead.log_path, TAIL_LINES))
                        return
                    delay = float(value)
