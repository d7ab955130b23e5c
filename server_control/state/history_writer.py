"""Which process writes a profile's history file (server_control/state/history.py).

    writer = HistoryWriter(path)      # <state dir>/history/<profile>.jsonl
    writer.take()                     # True: this process writes the file from now on
    writer.holder()                   # the writing process's pid, as it wrote it (None: unknown)
    writer.release()                  # on close (the kernel releases it when the holder dies)

One writer at a time: an ``flock`` (``FileLock``) on ``<file>.lock`` beside the history,
taken without waiting and held for the keeper's life; the holder writes its pid into the lock
file. A second console on the same profile watches the same server, so its points add
nothing the first one's lack: it keeps them in memory and tries again at each write, and
when the first one has gone it re-reads the file and adds its own newer points
(``History.write``). Merging two writers' files on every write would put two copies of every
moment in the file, one per console.
"""

from __future__ import annotations

import os
from pathlib import Path

from server_control.state.private_files import FileLock
from server_control.state.state_dir import private_dir

PID_BYTES = 32


class HistoryWriter:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock = FileLock(self.lock_path, f"the history writer lock of {self.path.name}")

    @property
    def held(self) -> bool:
        return self.lock.held

    def take(self) -> bool:
        """Take the writer's lock if nobody holds it (never waits). StateDirError when the
        directory is not private, OSError when it cannot be made."""
        if self.lock.held:
            return True
        private_dir(self.path.parent)
        if not self.lock.try_acquire():
            return False
        fd = os.open(self.lock_path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return True

    def holder(self) -> int | None:
        """The pid the writing process wrote in the lock file (None: none, or not a pid)."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            raw = os.read(fd, PID_BYTES)
        finally:
            os.close(fd)
        text = raw.decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None

    def release(self) -> None:
        self.lock.release()
