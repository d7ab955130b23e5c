"""Run records: what a console needs to find (adopt) a server it did not start.

One JSON file per profile, ``<state dir>/runs/<name>.json``, mode 0600, written atomically
(temp file + rename). A record is *live* only if a process with its pid exists AND that
process's start time equals the recorded one (so a reused PID is never mistaken for the
server) AND it is not a zombie.

State dir: ``server_control.state_dir.resolve_state_dir``.
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import psutil

from server_control.state_dir import resolve_state_dir

CREATE_TIME_TOLERANCE_S = 0.05


class RunConflict(RuntimeError):
    """A live run already holds this profile or its port (``.record`` is that run)."""

    def __init__(self, message: str, record: "RunRecord"):
        super().__init__(message)
        self.record = record


def iso_time(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


class RunRecordError(ValueError):
    """A run record file exists but cannot be read (names the file and the reason)."""


@dataclass
class RunRecord:
    name: str                 # profile name
    profile_path: str | None
    kind: str                 # sim | sglang
    pid: int
    create_time: float        # psutil create_time of pid
    pgid: int
    sid: int
    argv: list[str]           # secrets masked
    host: str
    port: int
    log_path: str
    cwd: str
    started_at: str           # ISO-8601, local time with offset
    restarts: int = 0
    stopping: bool = False    # set by `stop` before it signals, so a supervisor does not restart
    launcher_pid: int = 0     # the process that launched it (informational)
    log_paths: list[str] = field(default_factory=list)   # earlier logs of this run (restarts)
    exit_code: int | None = None       # set when the run ended FATAL (leader dead)
    fatal_reason: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict, where: str = "<record>") -> "RunRecord":
        if not isinstance(data, dict):
            raise RunRecordError(f"{where}: expected a JSON object")
        names = {f.name for f in fields(cls)}
        required = {"name", "kind", "pid", "create_time", "pgid", "sid", "argv", "host", "port",
                    "log_path", "cwd", "started_at"}
        missing = sorted(required - data.keys())
        if missing:
            raise RunRecordError(f"{where}: missing {', '.join(missing)}")
        kw = {k: v for k, v in data.items() if k in names}
        kw.setdefault("profile_path", None)
        for k in ("pid", "pgid", "sid", "port", "restarts"):
            if k in kw and (isinstance(kw[k], bool) or not isinstance(kw[k], int)):
                raise RunRecordError(f"{where}: {k} must be an integer, got {kw[k]!r}")
        if isinstance(kw["create_time"], bool) or not isinstance(kw["create_time"], (int, float)):
            raise RunRecordError(f"{where}: create_time must be a number")
        if not isinstance(kw["argv"], list):
            raise RunRecordError(f"{where}: argv must be a list")
        return cls(**kw)

    # -- liveness ---------------------------------------------------------------------------
    def leader(self) -> psutil.Process | None:
        """The server's main process if it is this run's (pid + start time), alive, not a zombie."""
        try:
            p = psutil.Process(self.pid)
            if abs(p.create_time() - self.create_time) > CREATE_TIME_TOLERANCE_S:
                return None
            if p.status() == psutil.STATUS_ZOMBIE:
                return None
            return p
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            return None

    def is_live(self) -> bool:
        return self.leader() is not None

    @property
    def uptime_s(self) -> float:
        return max(0.0, time.time() - self.create_time)


def runs_dir(state_dir: str | Path | None = None) -> Path:
    d = resolve_state_dir(state_dir) / "runs"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def record_path(name: str, state_dir: str | Path | None = None) -> Path:
    return runs_dir(state_dir) / f"{name}.json"


def save_record(rec: RunRecord, state_dir: str | Path | None = None) -> Path:
    """Atomic write, mode 0600."""
    path = record_path(rec.name, state_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(rec.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def load_record(name: str, state_dir: str | Path | None = None) -> RunRecord | None:
    """The record for a profile name, or None if there is none. Raises RunRecordError if bad."""
    path = record_path(name, state_dir)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
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


def live_record_on_port(port: int, state_dir: str | Path | None = None,
                        exclude: str | None = None) -> RunRecord | None:
    """A live run of another profile that holds ``port``."""
    for rec in list_records(state_dir):
        if rec.port == port and rec.name != exclude and rec.is_live():
            return rec
    return None


class RestartLock:
    """``runs/<name>.lock``, flock'ed by the one process that restarts crashes of a run.
    The kernel releases it when that process dies, however it dies."""

    def __init__(self, fd: int):
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, name: str, state_dir: str | Path | None = None) -> "RestartLock | None":
        fd = os.open(runs_dir(state_dir) / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
