"""The private files specconsole keeps in its state directory (server_control/state/state_dir.py).

* ``atomic_write(path, data)``: a temporary file opened ``O_CREAT | O_EXCL | O_NOFOLLOW``
  under an unpredictable name (a symlink planted at that name is never followed), fsync,
  rename over ``path``. Mode 0600 unless told.
* ``FileLock(path)``: an ``flock`` on a lock file (opened ``O_NOFOLLOW``); the kernel
  releases it when its holder dies. ``try_acquire()`` never waits; ``await acquire()``
  polls (never blocking an event loop), so two holders in one process cannot deadlock.
* ``read_regular(path, max_bytes)``: a file's bytes, refused (OSError with the reason) when
  it is not a regular file (a FIFO would hang the reader, ``/dev/zero`` would fill memory) or
  is larger than ``max_bytes``; opened non-blocking, read under the cap.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import time
from pathlib import Path

LOCK_POLL_S = 0.02
_NO_FILE = -1  # a lock "held" on a read-only filesystem where its file does not exist
LOCK_WAIT_S = 60.0
_PRIVATE_OPEN = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class LockTimeout(RuntimeError):
    """A FileLock stayed held by someone else for longer than the caller waits."""


def _token() -> str:
    return secrets.token_hex(8)


def open_private(path: str | Path, mode: int = 0o600) -> int:
    """A new file at ``path``: never an existing one, never through a symlink; exact mode."""
    fd = os.open(path, _PRIVATE_OPEN, mode)
    os.fchmod(fd, mode)  # the umask does not decide
    return fd


def atomic_write(path: str | Path, data: str | bytes, mode: int = 0o600) -> Path:
    """Write ``data`` to ``path`` atomically through an unpredictable O_EXCL|O_NOFOLLOW temp file."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    for _ in range(8):
        tmp = path.with_name(f".{path.name}.{_token()}.tmp")
        try:
            fd = open_private(tmp, mode)
            break
        except FileExistsError:  # something sits at that name (a planted symlink?): another name
            continue
    else:
        raise FileExistsError(f"{path}: could not create a private temporary file beside it")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


class FileLock:
    def __init__(self, path: str | Path, what: str = "lock") -> None:
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None
        self.read_only = False  # held through the read-only fallback (a read-only state filesystem)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES):
                raise
            # a read-only state filesystem (ext4 remounts so after I/O errors): flock works on
            # a read-only descriptor; with no lock file nobody can hold it (nobody can create it)
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                self._fd = _NO_FILE
                self.read_only = True
                return True
            self.read_only = True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self.read_only = False
            return False
        self._fd = fd
        return True

    async def acquire(self, timeout: float = LOCK_WAIT_S) -> FileLock:
        import asyncio  # here: the keeper imports this module and must start fast

        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{self.what} is still held by another specconsole process after {timeout:g} s ({self.path})")
            await asyncio.sleep(LOCK_POLL_S)
        return self

    def acquire_sync(self, timeout: float = LOCK_WAIT_S) -> FileLock:
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{self.what} is still held by another specconsole process after {timeout:g} s ({self.path})")
            time.sleep(LOCK_POLL_S)
        return self

    def is_held_elsewhere(self) -> bool:
        """True when another open file (another process, or another FileLock) holds it."""
        if self._fd is not None:
            return False
        if self.try_acquire():
            self.release()
            return False
        return True

    def release(self) -> None:
        self.read_only = False
        if self._fd == _NO_FILE:
            self._fd = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def __aenter__(self) -> FileLock:
        return await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def __enter__(self) -> FileLock:
        return self.acquire_sync()

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (OSError otherwise: FileNotFoundError
    as usual; EINVAL "not a regular file"; EFBIG "larger than N bytes")."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > max_bytes:
                raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes")
            chunks.append(chunk)
    finally:
        os.close(fd)
