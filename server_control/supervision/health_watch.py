"""The supervision loop, a part of ``Supervisor`` (server_control/supervision/supervisor.py):
health checks, the health watchdog, a failed start read from the starting run's log, and a
server's exit; what follows each failure (a restart with capped backoff, or FATAL at the start
limit) is ``CrashRestart``'s (crash_restart.py).

``await sup.watch()`` (``HealthWatch.watch``) runs until cancelled. Health: GET <url><[health] path> every
[health] interval_s. Crash restart only while this process holds the profile's restart
lock (``sup.supervising``); a second console only observes. While it supervises, the
process writes who it is (``supervisor``) and what it sees (``health``) into the run record.

Watchdog (as systemd's WatchdogSec): a server that was ready and then fails [health] ``failures`` checks in a row is
``unhealthy``; with [health] ``watchdog = true`` (the default) the supervising process stops it (SIGTERM + SIGCONT, grace,
SIGKILL: a hung or SIGSTOPped server goes too) and restarts it under the same backoff and start limit as a crash.

A poll that the run's server answered stands in for a health check (``poll_answered``: the session's ``/server_info``, which
goes through the scheduler): while polls keep being answered, a ready run is probed at ``[health] path`` only every
``PROBE_AT_LEAST_EVERY_S``, and from the first missing or failed answer on at every interval again, as before. Starting
(readiness) and unhealthy runs are always probed.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from server_control.host import identity
from server_control.model.vocabulary import FINAL_STATES, LIVE_STATES, RunState
from server_control.net import tls
from server_control.net.http import bounded_request, client_limits
from server_control.net.lean_httpx import httpx
from server_control.proc import process
from server_control.sanitize import strip_controls
from server_control.state import restart_lock, runs
from server_control.supervision.crash_restart import CrashRestart, CrashRestartPort
from server_control.supervision.start_failure import StartFailure, StartLog

if TYPE_CHECKING:
    from server_control.supervision.carried_settings import CarriedSettings
    from server_control.supervision.ownership import Ownership

IDLE_POLL_S = 1.0
DISK_BACKOFF_MAX_S = 30.0
PROBE_AT_LEAST_EVERY_S = 10.0  # a ready run is probed this often even while polls answer
STAND_IN_SLACK_S = 0.5  # how late the next answered poll may come and still stand in


def exit_words(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    if code < 0:
        return f"exit code {code}, killed by signal {-code}"
    return f"exit code {code}"


class HealthWatchPort(CrashRestartPort, Protocol):
    """What the watch reads and sets on its supervisor (supervisor.py), beyond what the
    restart after a failure does (crash_restart.py)."""

    record: runs.RunRecord | None
    state: RunState
    health_error: str | None
    ownership: Ownership
    carried: CarriedSettings

    @property
    def supervising(self) -> bool: ...

    @property
    def exit_file(self) -> Path: ...


class HealthWatch:
    """Watches one run for ``Supervisor``: its own state is the count of failed health
    checks in a row; the run's state it reads and sets on the supervisor."""

    def __init__(self, sup: HealthWatchPort) -> None:
        self.sup = sup
        self.fails = 0
        self.probes = 0  # health requests sent (the figures in docs/console.md)
        self._answered_until = 0.0  # monotonic: an answered poll stands in for checks until then
        self._probed_at = 0.0  # monotonic time of the last real probe
        self._start_log: StartLog | None = None  # the starting run's log, read forward
        self.restart = CrashRestart(sup)  # what follows a failure: a restart or FATAL

    def start_failure(self) -> StartFailure | None:
        """While the run starts: a failed start its log shows though its process lives on
        (start_failure.py: SGLang after uvicorn lost its port), else None."""
        rec = self.sup.record
        if rec is None or self.sup.state != RunState.STARTING or not rec.log_path:
            return None
        if self._start_log is None or self._start_log.path != str(rec.log_path):
            self._start_log = StartLog(rec.log_path)
        return self._start_log.scan()

    def poll_answered(self, started: float, next_poll_s: float) -> None:
        """The run's server answered a poll that began at ``started`` (monotonic) and the
        next one starts ``next_poll_s`` later: until that one is due (and its slack), no
        check needs the health path."""
        self._answered_until = max(self._answered_until, started + next_poll_s + STAND_IN_SLACK_S)

    def _poll_stands_in(self) -> bool:
        now = time.monotonic()
        return (
            self.sup.state == RunState.READY
            and self.fails == 0
            and now <= self._answered_until
            and now - self._probed_at < PROBE_AT_LEAST_EVERY_S
        )

    # -- what the record says about us ------------------------------------------------------
    def _sync_record(self) -> None:
        """Write who supervises and the health seen into the record (when they changed)."""
        rec = self.sup.record
        if not self.sup.supervising or rec is None or self.sup.state not in LIVE_STATES:
            return
        health = self.sup.state if self.sup.state in (RunState.READY, RunState.UNHEALTHY) else rec.health
        ready_at = rec.ready_at or (runs.iso_time(time.time()) if self.sup.state == RunState.READY else None)
        if (rec.supervisor or {}).get("pid") == os.getpid() and rec.health == health and rec.ready_at == ready_at:
            return  # (four times a second: no /proc read for what is unchanged)
        mine = self.sup.ownership.info()

        def change(r: runs.RunRecord) -> None:
            if (r.supervisor or {}).get("pid") != mine["pid"]:
                r.supervisor = mine
            r.health, r.ready_at = health, r.ready_at or ready_at

        saved = runs.try_update_record(self.sup.profile.name, self.sup.state_dir, rec.pid, change)
        if saved is not None and self.sup.record is rec:
            self.sup.record = saved

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
                self.sup.update(
                    last_error=f"supervision step failed: {exc.strerror or exc} ({exc.filename or ''}); "
                    f"still supervising, retrying in {backoff:g} s"
                )
                await asyncio.sleep(backoff)

    async def _watch(self) -> None:
        hl = self.sup.profile.health
        tick = min(0.25, hl["interval_s"])
        next_probe = 0.0
        client = httpx.AsyncClient(trust_env=False, verify=tls.shared(), timeout=hl["timeout_s"], limits=client_limits())
        try:
            while True:
                self.sup.ownership.try_lock()
                if (
                    self.sup.record is None
                    or self.sup.state in FINAL_STATES
                    or (self.sup.state == RunState.CRASHED and not self.sup.supervising)
                ):
                    await self._idle()
                    continue
                epoch = self.sup.epoch
                dead, code = await self._exit_status()
                if dead:  # an exit read across a stop or launch (the epoch moved) was the old server's
                    if epoch == self.sup.epoch:
                        await self._on_exit(code)
                        next_probe = 0.0
                    continue
                if time.monotonic() >= next_probe:
                    next_probe = time.monotonic() + hl["interval_s"]
                    why = self._start_failed_why() if self.sup.supervising else None
                    if why is not None:
                        await self._start_failed(why)
                        next_probe = 0.0
                        continue
                    self.sup.procs.current()
                    if not self._poll_stands_in():
                        await self._probe(client)
                    if self.sup.state == RunState.READY and self.sup.supervising and self.sup.record.runtime_pending:
                        await self.sup.carried.reapply()
                    if self._watchdog_due():
                        await self._watchdog()
                        next_probe = 0.0
                        continue
                self._sync_record()
                await asyncio.sleep(tick)
        finally:
            await client.aclose()
            self.sup.ownership.unlock()

    async def wait_ready(self, timeout: float) -> RunState:
        """Probe health until ready (no restarts); returns the state reached: ready, crashed
        (the server exited first) or starting (timeout)."""
        sup = self.sup
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(
            trust_env=False, verify=tls.shared(), timeout=sup.profile.health["timeout_s"], limits=client_limits()
        ) as c:
            while sup.record is not None:
                dead, code = await self._exit_status()
                if dead:  # (stopped by its supervisor for a failed start its log shows: said)
                    failure, pid = self.start_failure(), sup.record.pid
                    why = f"server pid {pid} did not start: {failure.words()}; " if failure else "server "
                    sup.update(RunState.CRASHED, exit_code=code, last_error=f"{why}exited before ready: {exit_words(code)}")
                    break
                failure = self.start_failure()
                if failure is not None:
                    await self._failed_before_ready(failure)
                    break
                await self._probe(c)
                if sup.state == RunState.READY:  # its members were recorded by the probe (procs.on_ready)
                    self._mark_ready()
                    await sup.carried.reapply()
                    break
                if time.monotonic() >= deadline:
                    break
                await asyncio.sleep(min(0.25, sup.profile.health["interval_s"]))
        return sup.state

    def _mark_ready(self) -> None:
        """Write ``ready_at`` into the record once the run was seen ready (a later hang then
        reads as unhealthy, not as still starting: `launch --wait` of an unsupervised run
        never wrote it). Best effort: a state dir that cannot be written changes nothing."""
        rec = self.sup.record
        if rec is None or rec.ready_at:
            return
        stamp = runs.iso_time(time.time())

        def change(r: runs.RunRecord) -> None:
            r.ready_at = r.ready_at or stamp

        try:
            saved = runs.try_update_record(self.sup.profile.name, self.sup.state_dir, rec.pid, change)
        except OSError:
            return
        if saved is not None and self.sup.record is rec:
            self.sup.record = saved

    async def _exit_status(self) -> tuple[bool, int | None]:
        """(dead, exit code or None) for the current record's server process."""
        rec = self.sup.record
        if rec is None or self.sup.procs.live(rec):
            return False, None
        code = await asyncio.to_thread(
            process.exit_status, self.sup.exit_file, rec.pid, rec.create_time, keeper_runs=rec.keeper_runs
        )
        return True, code

    async def _idle(self) -> None:
        """No live run of ours: adopt one launched elsewhere (e.g. `specconsole restart`)."""
        disk = self.sup.load_disk()
        mine = self.sup.record
        if disk is not None and self.sup.procs.live(disk) and not disk.stopping and (mine is None or disk.pid != mine.pid):
            self.sup.adopt()
            return
        await asyncio.sleep(IDLE_POLL_S)

    async def _probe(self, client: httpx.AsyncClient) -> None:
        url = self.sup.profile.url + self.sup.profile.health["path"]
        self.probes += 1
        self._probed_at = time.monotonic()
        try:
            r = await bounded_request(client, "GET", url)  # overall: 2 x [health] timeout_s
            ok, why = r.status_code == 200, f"HTTP {r.status_code}"
        except (httpx.HTTPError, OSError) as exc:
            ok, why = False, strip_controls(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        if self.sup.state not in LIVE_STATES:
            return
        if ok:
            self.fails = 0
            self.sup.procs.on_ready(was=self.sup.state)
            self.sup.update(RunState.READY, health_error=None)
            return
        self.fails += 1
        self.sup.update(health_error=f"GET {url}: {why}")
        if self.sup.state == RunState.READY and self.fails >= self.sup.profile.health["failures"]:
            self.sup.update(RunState.UNHEALTHY)

    # -- failures ---------------------------------------------------------------------------
    async def _failed_before_ready(self, failure: StartFailure) -> None:
        """``wait_ready`` saw a failed start: the run's supervisor elsewhere stops and restarts
        it (as the loop below does); with none, it is stopped here, since nothing else would
        and it would keep its GPUs for nothing."""
        sup, rec = self.sup, self.sup.record
        assert rec is not None
        if sup.supervising or not restart_lock.RestartLock.held_elsewhere(sup.profile.name, sup.state_dir):
            res = await process.stop_run(rec.identity(), sup.profile.stop_grace_s, sup.exit_file)
            how = f"did not start: {failure.words()}; stopped it ({exit_words(res.exit_code)})"
            if not res.ok:
                how += f"; {res.message}"
            sup.update(RunState.CRASHED, exit_code=res.exit_code, last_error=f"server pid {rec.pid} {how}")
            sup.journal("start failed", RunState.CRASHED, f"pid {rec.pid}: {how}")
            return
        sup.update(
            RunState.CRASHED,
            last_error=f"server pid {rec.pid} did not start: {failure.words()}; its supervisor stops it (as a crash)",
        )

    def _start_failed_why(self) -> str | None:
        """Why the starting run has failed to start though its process lives: its log says so
        (``start_failure``), or it is not ready ``[health] start_timeout_s`` after its start (a
        load or an initialisation that hangs: NCCL, a rank that never joins); else None."""
        failure = self.start_failure()
        if failure is not None:
            return failure.words()
        rec, limit = self.sup.record, float(self.sup.profile.health.get("start_timeout_s") or 0.0)
        if rec is None or self.sup.state != RunState.STARTING or limit <= 0 or rec.uptime_s < limit:
            return None
        last = f"; last check: {self.sup.health_error}" if self.sup.health_error else ""
        return f"not ready {limit:g} s after its start ([health] start_timeout_s{last})"

    async def _start_failed(self, why: str) -> None:
        """The supervising loop saw a failed start: stopped and treated as a crash. A port still
        held fails the restart's own check at once, so the start limit ends it."""
        rec = self.sup.record
        if rec is not None:
            await self._stop_failed(
                rec,
                f"server pid {rec.pid} did not start: {why}; stopping it",
                lambda code: f"did not start: {why}; stopped it ({exit_words(code)})",
                action="start failed",
            )

    async def _stop_failed(
        self, rec: runs.RunRecord, saying: str, how: Callable[[int | None], str], action: str | None = None
    ) -> None:
        """Stop a server whose process lives on through a failure the watch found (hung, or
        lingering after a failed start), said first; then what follows a failure
        (``CrashRestart``). A stop made elsewhere (under way, or begun meanwhile) is left to be
        one: nothing is restarted."""
        async with self.sup.op_lock:
            if self.sup.record is not rec or self._stopped_elsewhere():
                return
            self.sup.update(last_error=saying)
            res = await process.stop_run(rec.identity(), self.sup.profile.stop_grace_s, self.sup.exit_file)
            if self._stopped_elsewhere():  # a stop elsewhere began meanwhile: it is one
                self.sup.update(RunState.STOPPED, record=None, exit_code=res.exit_code, last_error=None)
                return
        said = how(res.exit_code) + ("" if res.ok else f"; {res.message}")
        self.sup.update(RunState.CRASHED, exit_code=res.exit_code, last_error=f"server pid {rec.pid} {said}")
        await self.restart.after_failure(rec, res.exit_code, said, action=action)

    def _watchdog_due(self) -> bool:
        sup = self.sup
        return (
            sup.state == RunState.UNHEALTHY
            and sup.supervising
            and sup.profile.health.get("watchdog", True)
            and self.fails >= sup.profile.health["failures"]
            and not sup.op_lock.locked()
            and not self._stopped_elsewhere()
        )

    def _stopped_elsewhere(self) -> bool:
        """A `stop` or `restart` elsewhere is under way (the record says ``stopping``) or done
        (the record is gone or another run's): the server's silence is its shutdown, and its
        exit is a stop (``_on_exit``), not a hang for the watchdog to kill and restart."""
        rec, disk = self.sup.record, self.sup.load_disk()
        return rec is None or disk is None or disk.stopping or disk.pid != rec.pid

    async def _watchdog(self) -> None:
        rec = self.sup.record
        if rec is None:  # nothing runs: nothing to stop
            return
        await self._stop_failed(
            rec,
            f"watchdog: {self.fails} health checks failed in a row "
            f"({self.sup.health_error}); stopping pid {rec.pid} to restart it",
            lambda code: f"unhealthy, stopped by the watchdog ({exit_words(code)})",
        )

    async def _on_exit(self, code: int | None) -> None:
        rec = self.sup.record
        assert rec is not None
        if self.sup.op_lock.locked():  # our own stop/launch is in progress
            await asyncio.sleep(0.05)
            return
        disk = self.sup.load_disk()
        if disk is None or disk.stopping:
            self.sup.update(RunState.STOPPED, record=None, exit_code=code)
            return
        if disk.pid != rec.pid and self.sup.procs.live(disk):
            self.sup.adopt()
            return
        how = exit_words(code)
        self.sup.update(RunState.CRASHED, record=disk, exit_code=code, last_error=f"server pid {rec.pid} exited: {how}")
        if not self.sup.supervising:
            return
        if identity.run_processes(disk.identity()):  # orphaned ranks still hold GPUs/ports
            res = await process.stop_run(disk.identity(), self.sup.profile.stop_grace_s, self.sup.exit_file)
            if not res.ok:
                self.sup.update(last_error=f"server pid {rec.pid} exited: {how}; {res.message}")
        await self.restart.after_failure(disk, code, how)
