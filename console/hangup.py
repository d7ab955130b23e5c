"""The terminal went away (an SSH link dropped, `tmux kill-session`, the window closed): the
kernel sends SIGHUP. The console then does what `q` then Enter does: close the view leaving
the server running, under its own detached supervisor (console/run_supervisor.py).

``install(leave, at_once)`` sets a plain signal handler, not the loop's: it runs in the main
thread even while the app's loop is blocked (a write to the dead terminal can block it:
console/exit_watchdog.py). ``at_once()`` runs in the handler itself (it arms the exit
watchdog: a thread start, nothing that waits); ``leave()`` (the app's own "quit, leave it
running") is then scheduled on the loop. The terminal is gone, so nothing is asked and
nothing is drawn.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable


def install(leave: Callable[[], None], at_once: Callable[[], None] | None = None) -> bool:
    """SIGHUP: ``at_once()`` in the handler, ``leave`` on the running loop. False where
    signals cannot be set here (not the main thread, Windows): Textual's default then stays."""
    try:
        loop = asyncio.get_running_loop()

        def on_sighup(_signum: int, _frame: object) -> None:
            if at_once is not None:
                at_once()
            loop.call_soon_threadsafe(leave)

        signal.signal(signal.SIGHUP, on_sighup)
    except (RuntimeError, ValueError, AttributeError):
        return False
    return True
