"""`specconsole ARGS` whose terminal output sticks once the terminal went away: a write of
Textual's writer thread that fails on the dead terminal (EIO) blocks for ever instead, as
the writer did in the field (stuck or dead, the main thread waiting for it in
``WriterThread.stop()``: Textual issue #6692). Deterministic where the real hang came 3
times in 5. ``--no-watchdog`` first: the console's exit watchdog never arms (the negative
control: the hang as it was).

    python tests/support/stuck_terminal.py [--no-watchdog] demo --no-mouse
"""

from __future__ import annotations

import sys
import threading

from textual.drivers import _writer_thread

from console.cli import main
from console.exit_watchdog import ExitWatchdog

HUNG_UP = threading.Event()


class _StuckFile:
    def __init__(self, file) -> None:
        self._file = file

    def write(self, text: str) -> int:
        try:
            n = self._file.write(text)
            self._file.flush()
        except OSError:  # the terminal is gone
            threading.Event().wait()  # never returns
        return n

    def flush(self) -> None:
        return  # every write flushed already

    def fileno(self) -> int:
        return self._file.fileno()


_init = _writer_thread.WriterThread.__init__


def _stuck_init(self, file) -> None:
    _init(self, _StuckFile(file))


_writer_thread.WriterThread.__init__ = _stuck_init  # type: ignore[method-assign]
argv = sys.argv[1:]
if argv[:1] == ["--no-watchdog"]:
    ExitWatchdog.arm = lambda self: None  # type: ignore[method-assign]
    argv = argv[1:]
sys.exit(main(argv))
