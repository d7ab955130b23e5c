"""With ``--json``, a command that fails without writing to stdout says why there as well.

A script that reads a command's stdout as JSON gets ``{"error": MESSAGE, "exit": CODE}`` on
a failure (the last message the command printed on stderr, argparse's usage error included),
never an empty stdout; stderr and the exit code stay what they are without ``--json``. A
command that wrote its own JSON (a stopped profile's ``{"error"}``, a partial answer) is
left alone, and so are Ctrl-C and a reader that left.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from console.cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, last_error
from server_control.sanitize import strip_controls

QUIET_EXITS = (0, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE)


class StdoutWatch:
    """``sys.stdout``, noting whether a command wrote anything to it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.wrote = False

    def write(self, text: str) -> int:
        self.wrote = self.wrote or bool(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class JsonFailure:
    """``watch()`` puts the watch on stdout when ``--json`` was asked for; ``report(code)``
    prints the JSON error where the command failed and wrote nothing, and returns ``code``."""

    def __init__(self, argv: list[str]) -> None:
        self.wanted = "--json" in argv
        self._watch: StdoutWatch | None = None

    def watch(self) -> None:
        if self.wanted and self._watch is None:
            self._watch = StdoutWatch(sys.stdout)
            sys.stdout = self._watch  # type: ignore[assignment]

    def report(self, code: int) -> int:
        watch, self._watch = self._watch, None
        if watch is not None:
            sys.stdout = watch._stream  # noqa: SLF001 - our own wrapper
        if self.wanted and code not in QUIET_EXITS and not (watch is not None and watch.wrote):
            message = last_error() or f"failed with exit code {code}"
            print(json.dumps({"error": strip_controls(message), "exit": code}), flush=True)
        return code
