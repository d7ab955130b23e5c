"""Run records: what a console needs to find (adopt) a server it did not start.

One JSON file per profile, ``<state dir>/runs/<name>.json``, mode 0600, written atomically
(server_control/state/private_files.py). A record is *live* only if a process with its pid exists
AND that process's start time and command line are the recorded ones (so a reused PID is
never mistaken for the server) AND it is not a zombie (server_control/host/identity.py).
The start time that identifies is ``boot_id`` + ``start_ticks`` (ticks since boot: the wall
clock cannot move it, server_control/host/start_ticks.py); ``create_time`` (epoch) is for display
and uptime. A record without them (written by an earlier version) is matched by
``create_time`` within ``identity.LEGACY_TOLERANCE_S`` until a supervisor adds them.

Locks in ``runs/``: ``<name>.op.lock`` (``profile_lock``) is held by whoever reads, decides
and rewrites the record (launch: from the "already running?" check to the saved record;
stop; every update), ``port-<port>.op.lock`` by a launch for its port, and
``<name>.lock`` (``restart_lock.RestartLock``) by the one process that restarts crashes.

State dir: ``server_control.state.state_dir.resolve_state_dir`` (refused when group- or
world-writable: ``StateDirError``).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

from server_control.host.identity import RunIdentity, verified_leader
from server_control.host.start_ticks import ProcStart, proc_start, recorded
from server_control.state.private_files import FileLock, atomic_write, read_regular
from server_control.state.state_dir import private_dir, resolve_state_dir

MAX_RECORD_BYTES = 4 << 20  # a run record or a keeper's note is a few kB: a FIFO or /dev/zero is refused

log = logging.getLogger(__name__)


class RunConflict(RuntimeError):
    """A live run already holds this profile or its port (``.record`` is that run)."""

    def __init__(self, message: str, record: RunRecord) -> None:
        super().__init__(message)
        self.record = record


def iso_time(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_pid(v: object) -> bool:
    """A process of ours: never 0 (our own group to kill), a negative number or init."""
    return _is_int(v) and v > 1  # type: ignore[operator]  # _is_int checked the type


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _strlist(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _member(m: object) -> bool:
    return (
        isinstance(m, list)
        and len(m) in (2, 3)
        and _is_pid(m[0])
        and isinstance(m[1], (int, float))
        and not isinstance(m[1], bool)
        and (len(m) == 2 or m[2] is None or _is_int(m[2]))
    )


# every field of a run record: (check, what it must be); None allowed where the type says
_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    **{k: (lambda v: isinstance(v, str), "must be a string") for k in ("name", "kind", "host", "log_path", "cwd", "started_at")},
    **{
        k: (lambda v: v is None or isinstance(v, str), "must be a string or null")
        for k in ("profile_path", "fatal_reason", "ready_at", "health", "boot_id", "last_exit")
    },
    **{k: (_is_pid, "must be a process id (an integer > 1)") for k in ("pid", "pgid")},
    # 0: the session's leader is outside this pid namespace (a container); a session id is only
    # ever compared, never signalled
    "sid": (lambda v: _is_int(v) and v >= 0, "must be a session id (an integer >= 0)"),  # type: ignore[operator]
    **{k: (_is_int, "must be an integer") for k in ("port", "restarts", "launcher_pid")},
    **{
        k: (lambda v: v is None or _is_int(v), "must be an integer or null")
        for k in ("exit_code", "start_ticks", "keeper_pid", "keeper_ticks")
    },
    **{k: (lambda v: isinstance(v, bool), "must be true or false") for k in ("stopping", "runtime_pending", "unsupervised")},
    **{k: (_strlist, "must be a list of strings") for k in ("argv", "log_paths", "titles")},
    "create_time": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "must be a number"),
    "members": (
        lambda v: isinstance(v, list) and all(_member(m) for m in v),
        "must be a list of [pid, create_time, start_ticks]",
    ),
    "supervisor": (lambda v: v is None or isinstance(v, dict), "must be an object or null"),
    "runtime": (lambda v: isinstance(v, dict), "must be an object"),
}


def _field_problem(key: str, value: object) -> str | None:
    check = _FIELDS.get(key)
    return None if check is None or check[0](value) else check[1]


class RunRecordError(ValueError):
    """A run record file exists but cannot be read (names the file and the reason)."""


@dataclass
class RunRecord:
    name: str  # profile name
    profile_path: str | None
    kind: str  # sim | sglang
    pid: int
    create_time: float  # psutil create_time of pid (epoch: display, uptime)
    pgid: int
    sid: int
    argv: list[str]  # secrets masked
    host: str
    port: int
    log_path: str
    cwd: str
    started_at: str  # ISO-8601, local time with offset
    restarts: int = 0
    stopping: bool = False  # set by `stop` before it signals, so a supervisor does not restart
    launcher_pid: int = 0  # the process that launched it (informational)
    log_paths: list[str] = field(default_factory=list)  # earlier logs of this run (restarts)
    exit_code: int | None = None  # set when the run ended FATAL (leader dead)
    fatal_reason: str | None = None
    members: list[Any] = field(default_factory=list)  # [pid, create_time, start_ticks] of the run's other processes
    titles: list[Any] = field(default_factory=list)  # command lines the leader later gave itself
    ready_at: str | None = None  # first time /health answered 200
    health: str | None = None  # ready | unhealthy, as the supervising process sees it
    supervisor: dict[str, Any] | None = None  # {pid, create_time, boot_id, start_ticks, kind, since}: who restarts crashes
    runtime: dict[str, Any] = field(default_factory=dict)  # settings changed at runtime (supervision/carried_settings.py)
    runtime_pending: bool = False  # a restart carried them: re-apply once the server is ready
    boot_id: str | None = None  # the leader's identity (None: an earlier version's record)
    start_ticks: int | None = None  # /proc/<pid>/stat starttime: ticks since that boot
    keeper_pid: int | None = None  # the keeper that copies the log and records the exit code
    keeper_ticks: int | None = None  # its start ticks (a reused pid is not the keeper)
    last_exit: str | None = None  # how the previous server of this run ended on its own (a restart's record)
    unsupervised: bool = False  # launched `--no-supervise`: nobody restarts a crash, by choice (no console starts a supervisor)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "<record>") -> RunRecord:
        if not isinstance(data, dict):
            raise RunRecordError(f"{where}: expected a JSON object")
        names = {f.name for f in fields(cls)}
        required = {"name", "kind", "pid", "create_time", "pgid", "sid", "argv", "host", "port", "log_path", "cwd", "started_at"}
        missing = sorted(required - data.keys())
        if missing:
            raise RunRecordError(f"{where}: missing {', '.join(missing)}")
        kw = {k: v for k, v in data.items() if k in names}
        kw.setdefault("profile_path", None)
        for k, v in kw.items():
            problem = _field_problem(k, v)
            if problem:
                raise RunRecordError(f"{where}: {k} {problem}, got {_short(v)}")
        return cls(**kw)

    # -- liveness ---------------------------------------------------------------------------
    @property
    def start(self) -> ProcStart | None:
        return recorded(self.boot_id, self.start_ticks)

    def identity(self) -> RunIdentity:
        return RunIdentity(
            self.pid,
            self.create_time,
            tuple(self.argv),
            tuple((int(m[0]), float(m[1]), m[2] if len(m) > 2 else None) for m in self.members),
            tuple(str(t) for t in self.titles),
            self.start,
        )

    def leader(self) -> psutil.Process | None:
        """The server's main process if it is this run's (pid + start time + command line)."""
        return verified_leader(self.identity())

    def is_live(self) -> bool:
        return self.leader() is not None

    def keeper_runs(self) -> bool:
        """A keeper is recorded and still runs: the exit code it writes is still to come."""
        return self.keeper_pid is not None and not self.keeper_gone()

    def keeper_gone(self) -> bool:
        """The run's keeper (recorded) no longer runs: its log stops growing and its exit
        code will not be known. False when no keeper is recorded (an earlier version)."""
        if self.keeper_pid is None or self.keeper_ticks is None:
            return False
        now = proc_start(self.keeper_pid)
        if now is None or now.ticks != self.keeper_ticks or (self.boot_id is not None and now.boot_id != self.boot_id):
            return True
        try:  # killed and not yet reaped (its parent is init, or a container's pid 1 that never reaps)
            return psutil.Process(self.keeper_pid).status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True

    @property
    def uptime_s(self) -> float:
        return max(0.0, time.time() - self.create_time)


def runs_dir(state_dir: str | Path | None = None) -> Path:
    return private_dir(resolve_state_dir(state_dir) / "runs")


def record_path(name: str, state_dir: str | Path | None = None) -> Path:
    return runs_dir(state_dir) / f"{name}.json"


def exit_file(name: str, state_dir: str | Path | None = None) -> Path:
    """Where the keeper of a profile's run records how the server ended."""
    return runs_dir(state_dir) / f"{name}.exit"


def log_manifest(name: str, state_dir: str | Path | None = None) -> Path:
    """The list of log files this profile's runs created (server_control/state/run_logs.py)."""
    return runs_dir(state_dir) / f"{name}.logs"


def profile_lock(name: str, state_dir: str | Path | None = None) -> FileLock:
    return FileLock(runs_dir(state_dir) / f"{name}.op.lock", f"the run record lock of profile {name!r}")


def port_lock(port: int, state_dir: str | Path | None = None) -> FileLock:
    return FileLock(runs_dir(state_dir) / f"port-{port}.op.lock", f"the launch lock of port {port}")


def save_record(rec: RunRecord, state_dir: str | Path | None = None) -> Path:
    """Atomic write, mode 0600 (never through a symlink)."""
    return atomic_write(record_path(rec.name, state_dir), rec.to_json())


def _update(name: str, state_dir: str | Path | None, pid: int, change: Callable[[RunRecord], None]) -> RunRecord | None:
    try:
        rec = load_record(name, state_dir)
    except RunRecordError:
        return None
    if rec is None or rec.pid != pid:
        return None
    change(rec)
    save_record(rec, state_dir)
    return rec


async def update_record(
    name: str, state_dir: str | Path | None, pid: int, change: Callable[[RunRecord], None]
) -> RunRecord | None:
    """Load, ``change(rec)`` and save the record under the profile lock, if it still belongs
    to ``pid``. Returns the saved record (None: no record of that pid)."""
    async with profile_lock(name, state_dir):
        return _update(name, state_dir, pid, change)


WARN_EVERY_S = 30.0
_WARNED_AT: dict[str, float] = {}  # profile name -> when its record last could not be updated (said)


def try_update_record(name: str, state_dir: str | Path | None, pid: int, change: Callable[[RunRecord], None]) -> RunRecord | None:
    """``update_record`` if the profile lock is free now; None (nothing done) if it is busy
    or the record cannot be written now (a full disk: these updates are best effort)."""
    lock = profile_lock(name, state_dir)
    try:
        if not lock.try_acquire():
            return None
    except OSError:
        return None
    try:
        return _update(name, state_dir, pid, change)
    except OSError as exc:
        now = time.monotonic()
        if now - _WARNED_AT.get(name, -WARN_EVERY_S) >= WARN_EVERY_S:  # a supervisor retries 4 times a second
            _WARNED_AT[name] = now
            log.warning("run record of %s not updated: %s (said at most every %.0f s)", name, exc, WARN_EVERY_S)
        return None
    finally:
        lock.release()


def load_record(name: str, state_dir: str | Path | None = None) -> RunRecord | None:
    """The record for a profile name, or None if there is none. Raises RunRecordError if bad."""
    path = record_path(name, state_dir)
    try:
        text = read_regular(path, MAX_RECORD_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunRecordError(f"{path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunRecordError(f"{path}: not valid JSON ({exc})") from None
    return RunRecord.from_dict(data, str(path))


def delete_record(name: str, state_dir: str | Path | None = None, pid: int | None = None) -> bool:
    """Remove a record (only if it still belongs to ``pid`` when given). True if removed."""
    path = record_path(name, state_dir)
    if pid is not None:
        try:
            current = load_record(name, state_dir)
        except RunRecordError:
            current = None
        if current is not None and current.pid != pid:
            return False
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def quarantine_record(name: str, state_dir: str | Path | None = None) -> Path | None:
    """Move an unreadable record aside (``<name>.json.bad``) so it never blocks a launch."""
    path = record_path(name, state_dir)
    bad = path.with_name(path.name + ".bad")
    try:
        os.replace(path, bad)
        return bad
    except OSError:
        return None


def keeper_note(name: str, state_dir: str | Path | None = None) -> dict[str, Any] | None:
    """The keeper's start note in ``runs/<name>.exit`` while its server runs (``returncode``
    null: server_control/keeper.py), or None."""
    try:
        note = json.loads(read_regular(exit_file(name, state_dir), MAX_RECORD_BYTES).decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or note.get("returncode", 0) is not None or not isinstance(note.get("record"), dict):
        return None
    return note


def recover_record(name: str, state_dir: str | Path | None = None) -> tuple[RunRecord, int | None] | None:
    """The live run of a profile whose record is missing or unreadable, from its keeper's
    start note: (the record as launched, the keeper's pid), or None (no such live run)."""
    note = keeper_note(name, state_dir)
    if note is None:
        return None
    try:
        rec = RunRecord.from_dict(note["record"], f"{exit_file(name, state_dir)} (record)")
    except RunRecordError:
        return None
    if rec.name != name or not rec.is_live():
        return None
    keeper = note.get("keeper_pid")
    return rec, keeper if _is_int(keeper) else None


def list_records(state_dir: str | Path | None = None) -> list[RunRecord]:
    """Every readable record (unreadable ones are skipped)."""
    out = []
    for p in sorted(runs_dir(state_dir).glob("*.json")):
        try:
            rec = load_record(p.stem, state_dir)
        except RunRecordError:
            continue
        if rec is not None:
            out.append(rec)
    return out


def live_record_on_port(port: int, state_dir: str | Path | None = None, exclude: str | None = None) -> RunRecord | None:
    """A live run of another profile that holds ``port``."""
    for rec in list_records(state_dir):
        if rec.port == port and rec.name != exclude and rec.is_live():
            return rec
    return None
