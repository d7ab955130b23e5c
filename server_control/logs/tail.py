"""Follow a file with ``tail -F`` semantics, by polling (no busy loop, no CPU when idle).

``Follower.poll()`` does one bounded, non-blocking step and returns an event or None:
  ("opened", None)     the file appeared (first time, or again after it was removed)
  ("data", bytes)      new bytes, at most ``chunk_size``
  ("rotated", None)    the path now names another file (rename + create): reading it from 0
  ("truncated", None)  the same file got shorter (copytruncate, ``: > file``): from 0 again
None means nothing new: sleep ``poll_interval`` before the next poll (``Follower.events``
does exactly that). Before switching to a rotated file the old one is read to its end; if
the writer rotated more than once since (``<path>`` -> ``<path>.1`` -> ``<path>.2`` ...,
proc/keeper.py), the parts written in between are read next, oldest first, each reported
as a rotation.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

DEFAULT_CHUNK = 1 << 20
DEFAULT_POLL_S = 0.1
MAX_PARTS = 1000  # rotated parts looked at (<path>.1 .. <path>.1000) to find a missed one


Event = tuple[str, bytes | None]  # ("opened" | "data" | "rotated" | "truncated", data)


class Follower:
    def __init__(
        self, path: str | os.PathLike[str], chunk_size: int = DEFAULT_CHUNK, poll_interval: float = DEFAULT_POLL_S
    ) -> None:
        self.path = Path(path)
        self.chunk_size = chunk_size
        self.poll_interval = poll_interval
        self.opened = 0  # times a file was opened at the path
        self.rotations = 0
        self.truncations = 0
        self.error: str | None = None  # why the path cannot be read now (None: fine/absent)
        self._f: BinaryIO | None = None
        self._id: tuple[int, int] | None = None
        self._pos = 0

    @property
    def position(self) -> int:
        return self._pos

    @property
    def is_open(self) -> bool:
        return self._f is not None

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def _open(self) -> bool:
        try:
            st = os.stat(self.path)
            if not stat.S_ISREG(st.st_mode):
                self.error = f"{self.path} is not a regular file"
                return False
            f = open(self.path, "rb")
        except FileNotFoundError:
            self.error = None
            return False
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            return False
        self._adopt(f)
        return True

    def _adopt(self, f: BinaryIO) -> None:
        st = os.fstat(f.fileno())
        self._f, self._id, self._pos, self.error = f, (st.st_dev, st.st_ino), 0, None
        self.opened += 1

    def _part_index(self, file_id: tuple[int, int] | None) -> int | None:
        """``i`` where ``<path>.i`` is the file ``file_id`` (the rotation scheme of the
        keeper, proc/keeper.py), None if no rotated part is that file."""
        for i in range(1, MAX_PARTS + 1):
            try:
                st = os.stat(f"{self.path}.{i}")
            except OSError:
                return None
            if (st.st_dev, st.st_ino) == file_id:
                return i
        return None

    def _successor(self, drained: tuple[int, int] | None) -> BinaryIO | None:
        """The rotated part written right after the file just drained, when the writer
        rotated more than once since the last poll (a loaded follower): ``<path>.(i-1)``
        where the drained file is now ``<path>.i``. None: the path's own file comes next
        (or the drained file is gone: what was between cannot be found)."""
        for _ in range(3):
            i = self._part_index(drained)
            if i is None or i == 1:
                return None
            try:
                f = open(f"{self.path}.{i - 1}", "rb")
            except OSError:
                return None
            if self._part_index(drained) == i:  # no rotation while opening: f is the successor
                return f
            f.close()
        return None

    def poll(self) -> Event | None:
        if self._f is None:
            return ("opened", None) if self._open() else None
        try:
            data = self._f.read(self.chunk_size)
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror or exc}"
            self.close()
            return None
        if data:
            self._pos += len(data)
            return ("data", data)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None  # removed or renamed away; keep the old file until a new one appears
        except OSError:
            return None
        if (st.st_dev, st.st_ino) != self._id:
            rest = self._f.read(self.chunk_size)  # written just before the rename
            if rest:
                self._pos += len(rest)
                return ("data", rest)
            drained = self._id
            self.close()
            successor = self._successor(drained)
            if successor is not None:
                self._adopt(successor)
            elif not self._open():
                return None
            self.rotations += 1
            return ("rotated", None)
        if st.st_size < self._pos:
            self._f.seek(0)
            self._pos = 0
            self.truncations += 1
            return ("truncated", None)
        return None

    async def events(self) -> AsyncIterator[Event]:
        """Async iterator of poll events; sleeps ``poll_interval`` whenever idle and yields
        to the event loop between chunks."""
        try:
            while True:
                event = self.poll()
                if event is None:
                    await asyncio.sleep(self.poll_interval)
                else:
                    yield event
                    await asyncio.sleep(0)
        finally:
            self.close()
