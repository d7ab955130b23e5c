"""Tail -> lines -> parser -> store: ``LogPipeline`` (async, follows) and ``iter_file``
(one pass over an existing file, as fast as it goes)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from server_control.logs.lines import LineSplitter
from server_control.logs.parse import Parser
from server_control.logs.store import LogStore
from server_control.logs.tail import DEFAULT_CHUNK, DEFAULT_POLL_S, Follower

Columns = tuple[list[int], list[str], list[str]]
FILE_CHUNK = 4 << 20


def iter_file(path: str | os.PathLike[str], chunk_size: int = FILE_CHUNK) -> Iterator[Columns]:
    """Parse a whole file from its start; yields column batches (see ``Parser.feed``).
    Raises OSError (FileNotFoundError, ...) when the file cannot be opened."""
    splitter = LineSplitter()
    parser = Parser()
    with open(path, "rb") as f:
        while True:
            data = f.read(chunk_size)
            if not data:
                break
            lines, text = splitter.feed(data)
            if lines:
                yield parser.feed(lines, text)
    lines, text = splitter.flush()
    if lines:
        yield parser.feed(lines, text)
    tail = parser.flush()
    if tail[0]:
        yield tail


class LogPipeline:
    """Follow ``path`` (tail -F) into ``store``. ``on_records(last_seq)`` and the
    ``new_records`` event fire after each batch of new records; the console flushes
    ``store.since(seen)`` on its own clock (e.g. every 50 ms)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        store: LogStore | None = None,
        on_records: Callable[[int], None] | None = None,
        *,
        poll_interval: float = DEFAULT_POLL_S,
        chunk_size: int = DEFAULT_CHUNK,
        idle_flush_s: float = 0.5,
    ) -> None:
        self.path = Path(path)
        self.store = store if store is not None else LogStore()
        self.follower = Follower(path, chunk_size=chunk_size, poll_interval=poll_interval)
        self.idle_flush_s = idle_flush_s
        self.new_records = asyncio.Event()
        self._listeners: list[Callable[[int], None]] = [on_records] if on_records else []
        self._splitter = LineSplitter()
        self._parser = Parser()
        self._stopped = False
        self.files = 0  # files read so far (1 + rotations/truncations/re-creations)

    def add_listener(self, callback: Callable[[int], None]) -> None:
        self._listeners.append(callback)

    def caught_up(self, size_at: int | None = None) -> bool:
        """The follower has read the log up to ``size_at`` (default: its size now); True when
        the file cannot be read."""
        try:
            size = self.path.stat().st_size if size_at is None else size_at
        except OSError:
            return True
        return self.follower.is_open and self.follower.position >= size

    @property
    def state(self) -> str:
        """ "waiting" (no file yet), "following", "error: <reason>", or "stopped"."""
        if self._stopped:
            return "stopped"
        if self.follower.error:
            return f"error: {self.follower.error}"
        return "following" if self.follower.is_open else "waiting"

    def stop(self) -> None:
        self._stopped = True

    def _store(self, columns: Columns) -> None:
        if columns[0] and self.store.extend_columns(*columns):
            self.new_records.set()
            for callback in list(self._listeners):
                callback(self.store.last_seq)

    def _restart_file(self) -> None:
        lines, text = self._splitter.flush()
        if lines:
            self._store(self._parser.feed(lines, text))
        self._store(self._parser.reset(1))
        self.files += 1

    def step(self) -> bool:
        """One non-blocking step; True when something was read."""
        event = self.follower.poll()
        if event is None:
            return False
        what, data = event
        if what == "data" and data is not None:
            lines, text = self._splitter.feed(data)
            if lines:
                self._store(self._parser.feed(lines, text))
        else:  # opened / rotated / truncated: a new file (line numbers from 1)
            self._restart_file()
        return True

    async def run(self) -> None:
        """Follow until ``stop()`` or cancellation; sleeps ``poll_interval`` when idle."""
        last_data = time.monotonic()
        try:
            while not self._stopped:
                if self.step():
                    last_data = time.monotonic()
                    await asyncio.sleep(0)
                    continue
                if self._parser.pending and time.monotonic() - last_data >= self.idle_flush_s:
                    self._store(self._parser.flush())
                await asyncio.sleep(self.follower.poll_interval)
        finally:
            self.follower.close()
