"""A console whose terminal is gone ends within 2 s, whatever Textual does.

When the terminal goes away (SIGHUP: an SSH link dropped, `tmux kill-session`), the view
closes, leaving the server running, and Textual shuts down. That shutdown can block for
ever: its driver's writer thread writes to a terminal that no longer exists, and the main
thread waits for it in ``WriterThread.stop()`` (a bounded queue nothing drains; Textual issue
#6692). The console then hung as an orphan. Nothing is lost when it is ended: the run's
supervisor is its own detached process (console/run_supervisor.py).

``ExitWatchdog.arm()`` (called in the SIGHUP handler: console/hangup.py) wakes its daemon
thread: if the command has not returned ``GRACE_S`` later, it runs ``before_exit`` (default:
nothing; a ``Once`` shared with the command's ``finally`` runs exactly once) and ends the
process with ``os._exit``. ``disarm()`` (the command returned) stops it.
"""

from __future__ import annotations

import os
import select
import sys
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

GRACE_S = 1.5  # the view's own shutdown gets this long after the hang-up (the goal: gone in 2 s)
EXIT_CODE = 0  # what `q` then Enter returns: the server was left running, as asked
ARM, DISARM = b"a", b"d"

T = TypeVar("T")


class Once(Generic[T]):
    """``fn`` run at most once, from whichever thread asks first; later calls wait for that
    run and return its result (the command's ``finally`` and the watchdog may race)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._done = False
        self._result: T | None = None

    def __call__(self) -> T | None:
        with self._lock:
            if not self._done:
                self._done = True
                self._result = self._fn()
            return self._result


class ExitWatchdog:
    """Started with the console (its thread waits on a pipe); ``arm()`` is one ``os.write``,
    safe inside a signal handler whatever the interrupted main thread held."""

    def __init__(self, before_exit: Callable[[], object] = lambda: None, grace_s: float = GRACE_S) -> None:
        self.before_exit = before_exit
        self.grace_s = grace_s
        self._read, self._write = os.pipe()
        self.armed = False
        self._thread = threading.Thread(target=self._run, name="specconsole-exit-watchdog", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        """Start counting (idempotent)."""
        if not self.armed:
            self.armed = True
            self._tell(ARM)

    def disarm(self) -> None:
        """Never fire (the thread ends)."""
        self._tell(DISARM)

    def finished(self) -> None:
        """The command returned: disarmed, unless the terminal went away (armed). Then the
        process still ends within the grace: Python's own shutdown joins Textual's input
        thread, which can spin on the dead terminal for ever (found as orphaned consoles at
        70 % of a core each, their main thread in ``threading._shutdown``)."""
        if not self.armed:
            self.disarm()

    def _tell(self, what: bytes) -> None:
        try:
            os.write(self._write, what)
        except OSError:  # closed: the thread ended already
            pass

    def _run(self) -> None:
        if os.read(self._read, 1) != ARM or select.select([self._read], [], [], self.grace_s)[0]:
            os.close(self._read)  # disarmed (within the grace: the view closed on its own)
            return
        try:
            self.before_exit()
        except Exception as exc:  # noqa: BLE001 - the process ends next whatever failed; say what did
            _say(f"specconsole: the last step before the forced exit failed: {exc!r}")
        _say(f"specconsole: the terminal is gone and the view did not close within {self.grace_s:g} s: ended")
        os._exit(EXIT_CODE)


def _say(line: str) -> None:
    """To stderr if anything is still there (a dead terminal: nothing to say it on)."""
    try:
        os.write(sys.__stderr__.fileno() if sys.__stderr__ else 2, (line + "\n").encode())
    except (OSError, ValueError):
        pass
