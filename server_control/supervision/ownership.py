"""Who supervises a run.

The process that holds a profile's restart lock writes ``{pid, create_time, boot_id,
start_ticks, kind, since}`` into the run record (``supervisor``); ``kind`` is its role:
``run`` (the run's own detached `specconsole supervise`, which every console and `launch`
starts with the run: console/run_supervisor.py), ``supervise`` (a `specconsole supervise`
someone started by hand) or, in records of earlier versions, ``console`` and ``handoff``.
``Ownership.of()`` says who it is, checked (the lock is held, that pid has that start: boot
id + start ticks, server_control/host/start_ticks.py; ``create_time`` only in an earlier
version's record).

A console is a client of its run's supervisor: its ``Ownership`` has ``may_lock`` False, so
it never takes the lock, never restarts a crash, and has nothing to hand over when it ends.

``Ownership`` is a part of ``Supervisor`` (server_control/supervision/supervisor.py): it
holds the restart lock and this process's role.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psutil

from server_control.host import identity
from server_control.host.start_ticks import proc_start, recorded
from server_control.model.run_status import SupervisorInfo
from server_control.state import restart_lock, runs
from server_control.state.private_files import FileLock
from server_control.state.runs import iso_time

if TYPE_CHECKING:
    from server_control.supervision.supervised import SupervisedProfile

log = logging.getLogger(__name__)
RUN = "run"  # the run's own detached supervisor
ROLES = (RUN, "supervise", "console")
ROLE_WORDS = {
    RUN: "the run's own specconsole supervise (detached)",
    "supervise": "specconsole supervise",
    "console": "a session supervising in its own process (the library's; a console of an earlier version)",
    "handoff": "specconsole supervise (handed over by a console of an earlier version)",
}


class OwnershipPort(Protocol):
    """What the ownership uses of its supervisor (supervisor.py)."""

    profile: SupervisedProfile
    state_dir: Path
    record: runs.RunRecord | None

    def changed(self) -> None: ...

    def load_disk(self) -> runs.RunRecord | None: ...


class Ownership:
    """The restart lock of one run and what this process says about itself as its supervisor."""

    def __init__(self, sup: OwnershipPort, role: str, may_lock: bool = True) -> None:
        self.sup = sup
        self.role = role
        self.may_lock = may_lock  # False: a client of the run's supervisor (a console) never supervises
        self.lock: FileLock | None = None
        self.took_over_from: SupervisorInfo | None = None  # a supervisor found gone when this process took the lock
        self.cannot_lock: str | None = None  # why the lock could not be taken though nobody holds it
        self._cache: tuple[float, SupervisorInfo | None] = (0.0, None)  # (monotonic, who) of a read
        self._lost: SupervisorInfo | None = None  # the recorded supervisor found gone at that read

    @property
    def supervising(self) -> bool:
        """This process holds the restart lock: it restarts the run's crashes."""
        return self.lock is not None

    def try_lock(self) -> None:
        if self.lock is None and self.may_lock:
            gone = None if self.sup.record is None else self.lost()
            try:
                self.lock = restart_lock.RestartLock.acquire(self.sup.profile.name, self.sup.state_dir)
            except restart_lock.ReadOnlyState as exc:
                if self.cannot_lock != str(exc):
                    self.cannot_lock = str(exc)
                    log.warning("%s: %s", self.sup.profile.name, exc)
                    self.sup.changed()
                return
            self.cannot_lock = None
            if self.lock is not None:
                if gone is not None and gone.pid != psutil.Process().pid:
                    log.warning(
                        "%s: took over supervision from %s pid %s, which ended without detaching",
                        self.sup.profile.name,
                        ROLE_WORDS.get(gone.kind, gone.kind),
                        gone.pid,
                    )
                    self.took_over_from = gone
                self.sup.changed()

    def unlock(self) -> None:
        if self.lock is None:
            return
        rec = self.sup.record
        if rec is not None:  # best effort: the next reader checks the pid anyway
            me = self.info()["pid"]
            runs.try_update_record(
                self.sup.profile.name,
                self.sup.state_dir,
                rec.pid,
                lambda r: setattr(r, "supervisor", None) if (r.supervisor or {}).get("pid") == me else None,
            )
        self.lock.release()
        self.lock = None
        self.sup.changed()

    def info(self) -> dict[str, Any]:
        """This process as the record's ``supervisor``."""
        me = psutil.Process()
        start = proc_start(me.pid)
        return {
            "pid": me.pid,
            "create_time": me.create_time(),
            "boot_id": start.boot_id if start else None,
            "start_ticks": start.ticks if start else None,
            "kind": self.role,
            "since": iso_time(time.time()),
        }

    def of(self) -> SupervisorInfo | None:
        """Who restarts this run's crashes: the process holding the restart lock (as the
        record names it, its pid and start time checked), or None."""
        if self.supervising:
            info = self.info()
            return SupervisorInfo(info["pid"], info["kind"], info["since"])
        now = time.monotonic()
        if now - self._cache[0] > 1.0:
            self._cache = (now, self._read())
        return self._cache[1]

    def _recorded(self) -> tuple[dict[str, Any], psutil.Process | None]:
        disk = self.sup.load_disk()
        info = (disk.supervisor if disk is not None else None) or {}
        try:
            p = psutil.Process(int(info["pid"]))
            start = recorded(info.get("boot_id"), info.get("start_ticks"))
            return info, p if identity.same_process(p, float(info["create_time"]), start) else None
        except (psutil.Error, KeyError, TypeError, ValueError):
            return info, None

    def _read(self) -> SupervisorInfo | None:
        info, proc = self._recorded()
        self._lost = None
        if proc is None or not restart_lock.RestartLock.held_elsewhere(self.sup.profile.name, self.sup.state_dir):
            # a supervisor that detaches clears its entry: one left behind ended without
            # detaching (kill -9, an OOM kill, a crash): said, never silently nobody
            self._lost = SupervisorInfo.from_json(info) if info.get("pid") else None
            return None
        return SupervisorInfo.from_json(info)

    def lost(self) -> SupervisorInfo | None:
        """The supervisor the record still names though it is gone (it ended without
        detaching); None when someone supervises, or the last one left cleanly."""
        if self.supervising:
            return None
        self.of()  # refreshes the cache and what was lost
        return self._lost

    def end_run_supervisor(self, rec: runs.RunRecord, wait_s: float = 5.0) -> int | None:
        """After a stop (not a restart's): the run's own detached supervisor (role ``run``,
        named by ``rec``; its pid, start time and a `supervise` command line checked; never
        this process) gets SIGTERM, which detaches it, so a stop leaves nothing of the run
        behind. Its pid once it ended (waited up to ``wait_s``), or None."""
        info = rec.supervisor or {}
        if info.get("kind") != RUN or info.get("pid") == psutil.Process().pid:
            return None
        try:
            proc = psutil.Process(int(info["pid"]))
            start = recorded(info.get("boot_id"), info.get("start_ticks"))
            if not identity.same_process(proc, float(info["create_time"]), start) or "supervise" not in proc.cmdline():
                return None
            proc.terminate()
            proc.wait(wait_s)
        except (psutil.Error, KeyError, TypeError, ValueError):
            return None
        return proc.pid
