"""The processes of a supervised run: is its leader alive, which processes are its own.

``RunProcesses`` is a part of ``Supervisor`` (server_control/supervision/supervisor.py). It
remembers the leaders this process launched or verified (a verified leader may retitle
itself, as smg's ``smg::router`` does) and lists the run's processes at most once a second.
The list is read afresh (``identity.run_processes``: every process on the machine is looked
at) each second while the run is not ready (its ranks are being started), and once it is
ready when the leader's identity changed, when a process of the last list is gone, or
``RESCAN_S`` after the last reading; in between it is the last reading's processes that
still run (a process started since is seen within ``RESCAN_S``; a stop reads afresh).
Once the run is ready, a verified leader is watched through a pidfd (Linux: it names that
one process, never a later one with its pid): while the pidfd is not readable the leader has
not exited, and ``live`` (asked four times a second) reads only the leader's command line
(a title it took since is recorded at once); it verifies the leader in full again
``RESCAN_S`` after the last time.
While the leader is verified it writes the run's other processes into the record: after the
leader is gone they are the only way to tell its orphaned ranks from strangers. They are
recorded the moment the run first answers health (``on_ready``): a crash right after ready
(before the once-a-second reading) left its ranks unknown, so nobody stopped them.
"""

from __future__ import annotations

import logging
import os
import select
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import psutil

from server_control.host import identity
from server_control.host.start_ticks import proc_start
from server_control.model.vocabulary import RunState
from server_control.proc import process
from server_control.proc.process import ProcInfo
from server_control.state import runs

if TYPE_CHECKING:
    from server_control.supervision.supervised import SupervisedProfile

log = logging.getLogger(__name__)
MAX_MEMBERS = 512
KEEPER_GONE = "the run's keeper is gone"
RESCAN_S = 10.0


class RunProcessesPort(Protocol):
    """What the run's processes use of their supervisor (supervisor.py)."""

    profile: SupervisedProfile
    state_dir: Path
    record: runs.RunRecord | None
    state: RunState
    last_error: str | None


class RunProcesses:
    def __init__(self, sup: RunProcessesPort) -> None:
        self.sup = sup
        self._seen: set[tuple[int, float]] = set()  # leaders this process launched or verified
        self._cache: tuple[float, list[ProcInfo]] = (0.0, [])
        self._scan: tuple[float, object, list[psutil.Process]] = (0.0, None, [])  # (when, leader, processes)
        self._pidfd: tuple[tuple[int, float], int, float] | None = None  # (leader, pidfd, verified at)

    def launched(self, pid: int, create_time: float) -> None:
        """This process started that leader: it is ours even after it retitles itself."""
        self._seen.add((pid, create_time))

    def on_ready(self, was: RunState | None = None) -> None:
        """The run answered health (coming from ``was``): read its processes afresh and record its
        members now that they all run (a crash a moment later must still find its orphans)."""
        if was != RunState.READY:
            self.forget()
            self.current()

    def forget(self) -> None:
        """The next ``current()`` reads the processes again."""
        self._cache = (0.0, [])
        self._scan = (0.0, None, [])

    def live(self, rec: runs.RunRecord) -> bool:
        """Is the record's leader running? Verified by pid + start time + command line; a
        leader this process launched or verified before may have retitled itself (smg's
        ``smg::router``): its new title is recorded so that other processes know it too."""
        key = (rec.pid, rec.create_time)
        if self._not_exited(key):
            self._note_title(rec)
            return True
        if rec.leader() is not None:
            self._watch_exit(rec)
            self._seen.add(key)
            if rec.start is None:
                self._record_start(rec)
            return True
        if key not in self._seen or (p := identity.retitled_leader(rec.identity())) is None:
            return False
        try:
            self._record_title(rec, p.cmdline())
        except psutil.Error:
            return False
        return True

    def _note_title(self, rec: runs.RunRecord) -> None:
        """A leader the pidfd says has not exited may have taken a new title since it was
        verified (smg takes ``smg::router``, at times after it answers as ready): one read of
        its command line records it at once, so another console knows the leader by it (it
        waited for the full check ``RESCAN_S`` later, and a second console found no run)."""
        ident = rec.identity()
        try:
            cmdline = psutil.Process(ident.pid).cmdline()
        except psutil.Error:
            return
        if not identity.cmdline_matches(cmdline, ident.argv) and identity.title(cmdline) not in ident.titles:
            self._record_title(rec, cmdline)

    def _record_title(self, rec: runs.RunRecord, cmdline: list[str]) -> None:
        """The title in the record on disk (then in ``rec``: a write that found the record's
        lock busy is tried again at the next call, not forgotten)."""
        t = identity.title(cmdline)
        if t in rec.titles:
            return
        saved = runs.try_update_record(
            self.sup.profile.name, self.sup.state_dir, rec.pid, lambda r: r.titles.append(t) if t not in r.titles else None
        )
        if saved is not None:
            rec.titles.append(t)

    def _not_exited(self, key: tuple[int, float]) -> bool:
        """The leader ``key``, verified alive before, has not exited since (its pidfd)."""
        if self._pidfd is None or self._pidfd[0] != key or self.sup.state != RunState.READY:
            return False
        fd, verified_at = self._pidfd[1], self._pidfd[2]
        if time.monotonic() - verified_at >= RESCAN_S:  # verify in full again (a new title?)
            return False
        if select.select([fd], [], [], 0)[0]:  # readable: it exited
            self._close_pidfd()
            return False
        return True

    def _watch_exit(self, rec: runs.RunRecord) -> None:
        key = (rec.pid, rec.create_time)
        if self._pidfd is not None and self._pidfd[0] == key:
            self._pidfd = (key, self._pidfd[1], time.monotonic())
            return
        self._close_pidfd()
        try:
            fd = os.pidfd_open(key[0])
        except (OSError, AttributeError):  # not Linux >= 5.3, or it exited meanwhile
            return
        self._pidfd = (key, fd, time.monotonic())
        if rec.leader() is None:  # verified before the pidfd was opened: still that process?
            self._close_pidfd()

    def __del__(self) -> None:
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd[1])
            self._pidfd = None

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
        runs.try_update_record(self.sup.profile.name, self.sup.state_dir, rec.pid, add)

    def current(self) -> list[ProcInfo]:
        """The current run's processes (read at most once a second); a keeper that died
        while its server runs is said in the supervisor's ``last_error``."""
        sup = self.sup
        rec = sup.record
        if rec is None:
            return []
        now = time.monotonic()
        if now - self._cache[0] > 1.0:
            self.live(rec)
            procs = self._processes(rec, now)
            self._cache = (now, process.describe(procs))
            self._remember_members(rec, procs)
            if any(p.pid == rec.pid for p in procs) and rec.keeper_gone() and not (sup.last_error or "").startswith(KEEPER_GONE):
                sup.last_error = (
                    f"{KEEPER_GONE} (pid {rec.keeper_pid}) while the server runs: its log no "
                    "longer grows (the log view and the verification are blind from now on) and "
                    "its exit code will not be known; restart the run to get them back"
                )
                log.warning("%s: %s", sup.profile.name, sup.last_error)
        return self._cache[1]

    def _processes(self, rec: runs.RunRecord, now: float) -> list[psutil.Process]:
        """The run's processes: the last reading's while they all run (see the module)."""
        ident = rec.identity()
        leader = (ident.pid, ident.create_time, ident.start)
        when, last_leader, procs = self._scan
        ready = self.sup.state == RunState.READY
        if ready and leader == last_leader and now - when < RESCAN_S and all(identity.alive(p) for p in procs):
            return procs
        procs = identity.run_processes(ident)
        self._scan = (now, leader, procs)
        return procs

    def _remember_members(self, rec: runs.RunRecord, procs: list[psutil.Process]) -> None:
        """Record the run's other processes while its leader is verified. Rewritten when
        one is new, or was recorded without start ticks (an earlier version's record)."""
        if not any(p.pid == rec.pid for p in procs):
            return
        fresh = [[pid, ct, ticks] for pid, ct, ticks in identity.member_pairs(procs, rec.pid)][-MAX_MEMBERS:]
        known = {(int(m[0]), m[2] if len(m) > 2 else None) for m in rec.members}
        if all((m[0], m[2]) in known for m in fresh):
            return

        def merge(r: runs.RunRecord) -> None:
            r.members = fresh

        saved = runs.try_update_record(self.sup.profile.name, self.sup.state_dir, rec.pid, merge)
        if saved is not None and self.sup.record is rec:
            self.sup.record = saved
