"""With ``--json``, a command that fails without writing to stdout says why there as well.

A script that reads a command's stdout as JSON gets ``{"error": MESSAGE, "exit": CODE}`` on
a failure (MESSAGE: the last line the command wrote to stderr, whichever printer wrote it,
argparse's usage error included), never an empty stdout; stderr and the exit code stay what
they are without ``--json``. A command that wrote its own JSON (a stopped profile's
``{"error"}``, a partial answer) is left alone, and so are Ctrl-C and a reader that left.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from console.cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED
from server_control.sanitize import strip_controls

QUIET_EXITS = (0, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE)
LINE_CAP = 2000  # characters of the last stderr line kept


class StreamWatch:
    """A text stream, noting whether anything was written to it and its last non-empty line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.wrote = False
        self.last_line = ""
        self._partial = ""

    def write(self, text: str) -> int:
        if text:
            self.wrote = True
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()[-LINE_CAP:]
            said = [line for line in lines if line.strip()]
            if said:
                self.last_line = said[-1][-LINE_CAP:]
        return self.stream.write(text)

    def said(self) -> str:
        return self._partial.strip() or self.last_line.strip()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class JsonFailure:
    """``watch()`` puts the watches on stdout and stderr when ``--json`` was asked for;
    ``report(code)`` prints the JSON error where the command failed and wrote nothing to
    stdout, and returns ``code``."""

    def __init__(self, argv: list[str]) -> None:
        self.wanted = "--json" in argv
        self._out: StreamWatch | None = None
        self._err: StreamWatch | None = None

    def watch(self) -> None:
        if self.wanted and self._out is None:
            self._out, self._err = StreamWatch(sys.stdout), StreamWatch(sys.stderr)
            sys.stdout, sys.stderr = self._out, self._err  # type: ignore[assignment]

    def report(self, code: int) -> int:
        out, err, self._out, self._err = self._out, self._err, None, None
        if out is not None and err is not None:
            sys.stdout, sys.stderr = out.stream, err.stream
        if self.wanted and code not in QUIET_EXITS and not (out is not None and out.wrote):
            message = (err.said() if err is not None else "") or f"failed with exit code {code}"
            print(json.dumps({"error": strip_controls(message), "exit": code}), flush=True)
        return code
