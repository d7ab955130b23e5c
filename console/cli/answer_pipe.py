"""The first answer of a detached `specconsole supervise` on a pipe (``--answer-fd``): what
the launcher (console/run_supervisor.py) reads to know whether the run was launched, or why
not, without reading the supervisor's log (which a full disk may leave empty)."""

from __future__ import annotations

import os
import sys
from typing import TextIO


class AnswerPipe:
    """``--answer-fd N`` (console/run_supervisor.py): until this supervisor has answered (its
    first event, or the error it ends with), what it says on stderr also goes to fd N; then
    N is closed, so the launcher reads the answer to EOF even when the log cannot be
    written (a full disk)."""

    def __init__(self, stream: TextIO | None, stderr: TextIO | None) -> None:
        self.stream = stream
        self.stderr = stderr

    @classmethod
    def open(cls, fd: int | None) -> AnswerPipe:
        if fd is None:
            return cls(None, None)
        try:
            stream = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        except OSError:
            return cls(None, None)
        pipe = cls(stream, sys.stderr)
        sys.stderr = pipe  # type: ignore[assignment]
        return pipe

    def write(self, text: str) -> int:
        for out in (self.stderr, self.stream):
            try:
                if out is not None:
                    out.write(text)
            except (OSError, ValueError):
                pass
        return len(text)

    def flush(self) -> None:
        for out in (self.stderr, self.stream):
            try:
                if out is not None:
                    out.flush()
            except (OSError, ValueError):
                pass

    def answered(self, line: str) -> None:
        """The first event: written to the pipe, which then closes."""
        self.write_pipe(line + "\n")
        self.close()

    def write_pipe(self, text: str) -> None:
        try:
            if self.stream is not None:
                self.stream.write(text)
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self.stream is None:
            return
        if sys.stderr is self and self.stderr is not None:
            sys.stderr = self.stderr
        try:
            self.stream.close()
        except OSError:
            pass
        self.stream = None
