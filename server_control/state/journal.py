"""The operator journal: every runtime change and lifecycle action, one JSON object per line
in ``<state dir>/journal.jsonl`` (0600; over 10 MB it moves to ``journal.jsonl.1``).

An entry says when, who (user@host, pid, which program), what (``action``: threshold,
force, hysteresis, dwell, launch, stop, restart, crash restart, watchdog restart, start
failed, restart failed, reapply, fatal), on which server (``target`` URL, ``profile``), ``old`` -> ``new`` and the
``result``. A runtime change writes three entries with one ``op`` id: ``pending`` (before
it is sent), ``read back`` (the server answered and was read back) and its result: other
clients of the same host use them to tell a concurrent change (server_control/control/
guard.py). Writing never fails an operation: a journal that cannot be written is
skipped (logged).
"""

from __future__ import annotations

import errno
import getpass
import json
import logging
import math
import os
import socket
import stat
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from server_control.sanitize import strip_controls
from server_control.state.private_files import read_regular
from server_control.state.state_dir import resolve_state_dir

log = logging.getLogger(__name__)
JOURNAL_NAME = "journal.jsonl"
MAX_BYTES = 10_000_000
PENDING, READ_BACK = "pending", "read back"
STEPS = (PENDING, READ_BACK)  # the steps of a runtime change before its result
_TEXT_FIELDS = ("user", "host", "program", "action", "target", "result", "detail", "op")
_APPEND = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Entry:
    time: float
    user: str
    host: str
    pid: int
    program: str
    action: str
    target: str = ""
    profile: str | None = None
    key: str | None = None
    old: object = None
    new: object = None
    result: str = ""
    detail: str = ""
    op: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: object) -> Entry | None:
        """An entry from one journal line; None when any field has the wrong type (a line
        written by hand or by something else: ``"time": "yesterday"``)."""
        if not isinstance(raw, dict):
            return None
        try:
            e = cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})
        except TypeError:
            return None
        if isinstance(e.time, bool) or not isinstance(e.time, (int, float)) or not math.isfinite(e.time):
            return None
        if isinstance(e.pid, bool) or not isinstance(e.pid, int):
            return None
        if not all(isinstance(getattr(e, k), str) for k in _TEXT_FIELDS):
            return None
        if not all(getattr(e, k) is None or isinstance(getattr(e, k), str) for k in ("profile", "key")):
            return None
        return e

    @property
    def who(self) -> str:
        return f"{self.user}@{self.host} pid {self.pid} ({self.program})"

    def words(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        what = f"{self.old} -> {self.new}" if self.key or self.old is not None or self.new is not None else ""
        return strip_controls(
            "  ".join(
                x
                for x in (
                    when,
                    f"{self.user}@{self.host}",
                    f"pid {self.pid}",
                    self.program,
                    self.profile or self.target,
                    self.action,
                    what,
                    self.result,
                    self.detail,
                )
                if x
            )
        )


def journal_path(state_dir: str | Path | None = None) -> Path:
    return resolve_state_dir(state_dir) / JOURNAL_NAME


def program() -> str:
    """What wrote the entry: ``specconsole threshold``, ``specconsole supervise``, ``console``."""
    args = [a for a in sys.argv[1:3] if not a.startswith("-")]
    name = os.path.basename(sys.argv[0] or "python")
    if name in ("__main__.py", "main.py", "-c") or name.startswith("python"):
        name = "specconsole"
    return f"{name} {args[0]}" if args else name


def new_op() -> str:
    return uuid.uuid4().hex[:12]


def record(state_dir: str | Path | None, action: str, **fields: Any) -> Entry | None:
    """Append an entry (best effort). ``state_dir`` None: the default state dir."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        user = str(os.getuid())
    entry = Entry(
        time=time.time(), user=user, host=socket.gethostname(), pid=os.getpid(), program=program(), action=action, **fields
    )
    try:
        path = journal_path(state_dir)
        if path.exists() and path.stat().st_size > MAX_BYTES:
            os.replace(path, path.with_name(JOURNAL_NAME + ".1"))
        fd = os.open(path, _APPEND | os.O_NONBLOCK, 0o600)  # a FIFO without a reader: ENXIO, not a hang; RDWR: pread
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, f"{path} is not a regular file")
            line = json.dumps(entry.to_json(), default=str) + "\n"
            if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
                line = "\n" + line  # the last line is torn (a writer died mid-line): never glue onto it
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except Exception as exc:  # noqa: BLE001 - writing the journal never fails an operation
        log.warning("operator journal not written: %s", exc)
        return None
    return entry


@dataclass(frozen=True)
class JournalRead:
    """What a read of the journal found: its entries (oldest first, filtered), how many lines
    were not a valid entry, and why the file could not be read at all (None when it could, or
    when there is no journal yet)."""

    entries: list[Entry]
    skipped: int = 0
    unreadable: str | None = None


def read(
    state_dir: str | Path | None = None,
    *,
    target: str | None = None,
    profile: str | None = None,
    since: float | None = None,
    limit: int | None = None,
) -> list[Entry]:
    """Entries oldest first, filtered by server URL and/or profile name and time (bad
    lines skipped, an unreadable file read as none: ``read_counted`` says both). Never raises."""
    return read_counted(state_dir, target=target, profile=profile, since=since, limit=limit).entries


def read_counted(
    state_dir: str | Path | None = None,
    *,
    target: str | None = None,
    profile: str | None = None,
    since: float | None = None,
    limit: int | None = None,
) -> JournalRead:
    """The entries, the lines skipped, and why the file could not be read (a FIFO, a
    directory, over its size cap, no permission): never raises."""
    try:
        path = journal_path(state_dir)
    except (OSError, ValueError) as exc:
        return JournalRead([], 0, str(exc))
    try:
        lines = read_regular(path, 4 * MAX_BYTES).decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        lines = []
    except OSError as exc:
        return JournalRead([], 0, exc.strerror or str(exc))
    out: list[Entry] = []
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            e = Entry.from_json(json.loads(line))
        except (ValueError, RecursionError):
            e = None
        if e is None:
            bad += 1
            continue
        if (target and e.target != target) or (profile and e.profile != profile):
            continue
        if since is not None and e.time < since:
            continue
        out.append(e)
    return JournalRead(out[-limit:] if limit else out, bad)
