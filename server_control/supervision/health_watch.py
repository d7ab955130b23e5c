"""The supervision loop of ``Supervisor`` (server_control/supervision/supervisor.py): health checks,
crash restart with capped backoff, start limit -> FATAL, and the health watchdog.

``await sup.watch()`` runs until cancelled. Health: GET <url><[health] path> every
[health] interval_s. Crash restart only while this process holds the profile's restart
lock (``sup.supervising``); a second console only observes. While it supervises, the
process writes who it is (``supervisor``) and what it sees (``health``) into the run record.

Watchdog (as systemd's WatchdogSec): a server that was ready and then fails [health]
``failures`` checks in a row is ``unhealthy``; with [health] ``watchdog = true`` (the
default) the supervising process stops it (SIGTERM + SIGCONT, grace, SIGKILL: a hung or
SIGSTOPped server goes too) and restarts it under the same backoff and start limit as a crash.
"""
from __future__ import annotations

import asyncio
import time

import httpx

from server_control.model.vocabulary import FINAL_STATES, LIVE_STATES, RunState
from server_control.proc import process
from server_control.sanitize import strip_controls
from server_control.state import identity, run_logs, runs
from server_control.supervision.supervised import SupervisorParts
from server_control.telemetry.http_poll import bounded_request

TAIL_LINES = 50
IDLE_POLL_S = 1.0
DISK_BACKOFF_MAX_S = 30.0


def exit_words(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    if code < 0:
        return f"exit code {code}, killed by signal {-code}"
    return f"exit code {code}"


class WatchLoop(SupervisorParts):
    """The supervision loop; a part of ``Supervisor`` (its state: ``SupervisorParts``)."""

    # -- the restart lock and what the record says about us --------------------------------
    def _try_lock(self) -> None:
        if self._lock is None:
            self._lock = runs.RestartLock.acquire(self.profile.name, self.state_dir)
            if self._lock is not None:
                self._set(supervising=True)

    def _unlock(self) -> None:
        if self._lock is not None:
            rec = self.record
            if rec is not None:   # best effort: the next reader checks the pid anyway
                me = self.supervisor_info()["pid"]
                runs.try_update_record(self.profile.name, self.state_dir, rec.pid,
                                       lambda r: setattr(r, "supervisor", None)
                                       if (r.supervisor or {}).get("pid") == me else None)
            self._lock.release()
            self._lock = None
        self._set(supervising=False)

    def _sync_record(self) -> None:
        """Write who supervises and the health seen into the record (when they changed)."""
        rec = self.record
        if not self.supervising or rec is None or self.state not in LIVE_STATES:
            return
        mine = self.supervisor_info()
        health = self.state if self.state in (RunState.READY, RunState.UNHEALTHY) else rec.health
        ready_at = rec.ready_at or (runs.iso_time(time.time()) if self.state == RunState.READY else None)
        if (rec.supervisor or {}).get("pid") == mine["pid"] and rec.health == health \
                and rec.ready_at == ready_at:
            return

        def change(r: runs.RunRecord) -> None:
            if (r.supervisor or {}).get("pid") != mine["pid"]:
                r.supervisor = mine
            r.health, r.ready_at = health, r.ready_at or ready_at
        saved = runs.try_update_record(self.profile.name, self.state_dir, rec.pid, change)
        if saved is not None and self.record is rec:
            self.record = saved

    # -- the loop ---------------------------------------------------------------------------
    async def watch(self) -> None:
        """Supervise until cancelled. A state dir that cannot be written (a full disk) never
        ends it: the step is retried with a backoff of 1 s doubling to 30 s, and said."""
        backoff = 0.0
        while True:
            try:
                await self._watch()
                return
            except OSError as exc:
                backoff = min(DISK_BACKOFF_MAX_S, backoff * 2 or 1.0)
                self._set(last_error=f"supervision step failed: {exc.strerror or exc} ({exc.filename or ''}); "
                          f"still supervising, retrying in {backoff:g} s")
                await asyncio.sleep(backoff)

    async def _watch(self) -> None:
        hl = self.profile.health
        tick = min(0.25, hl["interval_s"])
        next_probe = 0.0
        client = httpx.AsyncClient(trust_env=False, timeout=hl["timeout_s"])
        try:
            while True:
                self._try_lock()
                if self.record is None or self.state in FINAL_STATES or (
                        self.state == RunState.CRASHED and not self.supervising):
                    await self._idle()
                    continue
                dead, code = await self._exit_status()
                if dead:
                    await self._on_exit(code)
                    next_probe = 0.0
                    continue
                if time.monotonic() >= next_probe:
                    next_probe = time.monotonic() + hl["interval_s"]
                    self.processes()
                    await self._probe(client)
                    if self.state == RunState.READY and self.supervising and self.record.runtime_pending:
                        await self.reapply_runtime()
                    if self._watchdog_due():
                        await self._watchdog()
                        next_probe = 0.0
                        continue
                self._sync_record()
                await asyncio.sleep(tick)
        finally:
            await client.aclose()
            self._unlock()

    async def _idle(self) -> None:
        """No live run of ours: adopt one launched elsewhere (e.g. `specconsole restart`)."""
        disk = self._load_disk()
        mine = self.record
        if disk is not None and self._live(disk) and not disk.stopping and (
                mine is None or disk.pid != mine.pid):
            self.adopt()
            return
        await asyncio.sleep(IDLE_POLL_S)

    async def _probe(self, client: httpx.AsyncClient) -> None:
        url = self.profile.url + self.profile.health["path"]
        try:
            r = await bounded_request(client, "GET", url)   # overall: 2 x [health] timeout_s
            ok, why = r.status_code == 200, f"HTTP {r.status_code}"
        except (httpx.HTTPError, OSError) as exc:
            ok, why = False, strip_controls(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        if self.state not in LIVE_STATES:
            return
        if ok:
            self._fails = 0
            self._set(RunState.READY, health_error=None)
            return
        self._fails += 1
        self._set(health_error=f"GET {url}: {why}")
        if self.state == RunState.READY and self._fails >= self.profile.health["failures"]:
            self._set(RunState.UNHEALTHY)

    # -- failures ---------------------------------------------------------------------------
    def _watchdog_due(self) -> bool:
        return (self.state == RunState.UNHEALTHY and self.supervising and self.profile.health.get("watchdog", True)
                and self._fails >= self.profile.health["failures"] and not self._op_lock.locked())

    async def _watchdog(self) -> None:
        rec = self.record
        if rec is None:   # nothing runs: nothing to stop
            return
        why = (f"watchdog: {self._fails} health checks failed in a row ({self.health_error}); "
               f"stopping pid {rec.pid} to restart it")
        self._set(last_error=why)
        async with self._op_lock:
            if self.record is not rec:
                return
            res = await process.stop_run(rec.identity(), self.profile.stop_grace_s, self.exit_file)
        how = f"unhealthy, stopped by the watchdog ({exit_words(res.exit_code)})"
        if not res.ok:
            how += f"; {res.message}"
        self._set(RunState.CRASHED, exit_code=res.exit_code, last_error=f"server pid {rec.pid} {how}")
        await self._after_failure(rec, res.exit_code, how)

    async def _on_exit(self, code: int | None) -> None:
        rec = self.record
        assert rec is not None
        if self._op_lock.locked():      # our own stop/launch is in progress
            await asyncio.sleep(0.05)
            return
        disk = self._load_disk()
        if disk is None or disk.stopping:
            self._set(RunState.STOPPED, record=None, exit_code=code)
            return
        if disk.pid != rec.pid and self._live(disk):
            self.adopt()
            return
        how = exit_words(code)
        self._set(RunState.CRASHED, record=disk, exit_code=code, last_error=f"server pid {rec.pid} exited: {how}")
        if not self.supervising:
            return
        if identity.run_processes(disk.identity()):   # orphaned ranks still hold GPUs/ports
            res = await process.stop_run(disk.identity(), self.profile.stop_grace_s, self.exit_file)
            if not res.ok:
                self._set(last_error=f"server pid {rec.pid} exited: {how}; {res.message}")
        await self._after_failure(disk, code, how)

    async def _after_failure(self, rec: runs.RunRecord, code: int | None, how: str) -> None:
        decision, value = self.policy.after_crash(time.monotonic(), ran_for_s=rec.uptime_s)
        self.journal("watchdog restart" if "watchdog" in how else "crash", RunState.FATAL if decision == RunState.FATAL
                     else f"restart in {float(value):g} s", f"pid {rec.pid}: {how}")
        if decision == RunState.FATAL:
            reason = f"{value}; last {how}"

            def fatal(r: runs.RunRecord) -> None:
                r.exit_code, r.fatal_reason = code, reason
            try:
                await runs.update_record(self.profile.name, self.state_dir, rec.pid, fatal)
            except OSError as exc:
                reason += f" (not kept in the run record: {exc.strerror or exc})"
            self._set(RunState.FATAL, fatal_reason=reason, fatal_tail=run_logs.tail_lines(rec.log_path, TAIL_LINES))
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
                    self._set(RunState.STOPPED, record=None, next_restart_at=None)
                    return
                if disk.pid != dead.pid and self._live(disk):   # relaunched elsewhere
                    self._set(next_restart_at=None)
                    self.adopt()
                    return
                self.restarts += 1
                runtime = disk.runtime if disk.pid == dead.pid else dead.runtime
                try:
                    await self._start(previous_logs=[*dead.log_paths, dead.log_path], runtime=runtime)
                    return
                except runs.RunConflict as exc:   # someone else relaunched it: adopt theirs
                    self.restarts -= 1
                    self._set(last_error=str(exc), next_restart_at=None)
                    self.adopt()
                    return
                except Exception as exc:  # noqa: BLE001 - busy port, bad python...: counts as a failed start
                    self.policy.record_start(time.monotonic())
                    self._set(RunState.CRASHED, next_restart_at=None, last_error=f"restart failed: {exc}")
                    decision, value = self.policy.after_crash(time.monotonic())
                    if decision == RunState.FATAL:
                        self._set(RunState.FATAL, fatal_reason=f"{value}; last start failed: {exc}",
                                  fatal_tail=run_logs.tail_lines(dead.log_path, TAIL_LINES))
                        return
                    delay = float(value)
