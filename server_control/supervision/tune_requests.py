"""Turning the supervisor's tuner back on: a request in the operator journal.

An operator's N turns ``supervise --auto-tune`` off (supervision/live_tuner.py). To turn it
back on without restarting ``supervise``, ``specconsole threshold auto`` appends a request
to the journal (``action`` auto-tune, ``result`` requested, an ``op`` id, the server's URL
as ``target``); the supervising process follows the journal (``Follower``: only the bytes
appended since its last look, never the whole file again), turns its tuner on, and answers
with an entry of the same ``op`` (``result`` on), which the command waits for (``answer``).
The journal is the channel because every process of this host already writes and reads it
(state/journal.py), it keeps who asked and when, and it needs no port or socket. Neither
entry names a setting ``key``: the control guard (control/guard.py) takes entries with a
key and an op for another client's change of that setting, and these change nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from server_control.state import journal

ACTION = "auto-tune"
REQUESTED, ON = "requested", "on"
ASK_DETAIL = "turn auto-tune back on"


def same_server(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def ask(state_dir: str | Path | None, url: str, profile: str | None) -> journal.Entry | None:
    """Append the request; the entry (its ``op`` is what the answer carries), None if the
    journal could not be written."""
    return journal.record(
        state_dir,
        ACTION,
        target=url,
        profile=profile,
        result=REQUESTED,
        detail=ASK_DETAIL,
        op=journal.new_op(),
    )


def answer(follow: Follower, op: str, timeout_s: float, every_s: float = 0.2) -> journal.Entry | None:
    """The supervising process's answer to the request ``op`` among the entries ``follow``
    (made before the request was written) sees, or None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        for e in follow.new_entries():
            if e.action == ACTION and e.op == op and e.result == ON:
                return e
        if time.monotonic() >= deadline:
            return None
        time.sleep(every_s)


class Follower:
    """The journal's entries appended since the last call (complete lines only). Starts at
    the end of the file (``at_end``) or at its beginning. A rotation (the file replaced by a
    new one, state/journal.py's ``journal.jsonl.1``) is followed: the rest of the old file,
    then the new one from its start."""

    def __init__(self, state_dir: str | Path | None, at_end: bool = True) -> None:
        self.path = journal.journal_path(state_dir)
        self._ino: int | None = None
        self._offset = 0
        st = self._stat(self.path)
        if st is not None:
            self._ino, self._offset = st.st_ino, (st.st_size if at_end else 0)

    @staticmethod
    def _stat(path: Path) -> os.stat_result | None:
        try:
            return path.stat()
        except OSError:
            return None

    def _read(self, path: Path, offset: int) -> tuple[bytes, int]:
        """Complete lines from ``offset``: (their bytes, the offset after them)."""
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return b"", offset
        end = data.rfind(b"\n") + 1
        return data[:end], offset + end

    def new_entries(self) -> list[journal.Entry]:
        st = self._stat(self.path)
        if st is None:
            return []
        chunks = []
        if self._ino is not None and st.st_ino != self._ino:  # rotated: the old file's rest first
            old = self.path.with_name(journal.JOURNAL_NAME + ".1")
            old_st = self._stat(old)
            if old_st is not None and old_st.st_ino == self._ino:
                chunks.append(self._read(old, self._offset)[0])
            self._offset = 0
        elif st.st_size < self._offset:  # truncated or replaced in place
            self._offset = 0
        self._ino = st.st_ino
        data, self._offset = self._read(self.path, self._offset)
        chunks.append(data)
        out = []
        for line in b"".join(chunks).decode("utf-8", errors="replace").splitlines():
            try:
                e = journal.Entry.from_json(json.loads(line))
            except (ValueError, RecursionError):
                e = None
            if e is not None:
                out.append(e)
        return out

    def requests(self, url: str) -> list[journal.Entry]:
        """New requests to turn tuning on for the server at ``url``."""
        return [
            e for e in self.new_entries() if e.action == ACTION and e.result == REQUESTED and e.op and same_server(e.target, url)
        ]
