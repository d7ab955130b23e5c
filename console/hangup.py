"""The terminal went away (an SSH link dropped, `tmux kill-session`, the window closed): the
kernel sends SIGHUP. The console then does what `q` then Enter does: close the session
leaving the server running, so the command hands supervision to a detached `specconsole
supervise` (console/handoff.py), instead of dying with the server left unsupervised.

``install(leave)`` sets the handler on the app's loop (``leave()``: the app's own
"quit, leave it running"); the terminal is gone, so nothing is asked and nothing is drawn.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable


def install(leave: Callable[[], None]) -> bool:
    """SIGHUP calls ``leave`` on the running loop. False where signals cannot be set here
    (not the main thread, Windows): Textual's default then stays."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, leave)
    except (NotImplementedError, RuntimeError, ValueError, AttributeError):
        return False
    return True
