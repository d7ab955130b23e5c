"""The terminal driver: Textual's, with the mouse reporting clicks and the wheel only, and
no style sequence sent twice in a row.

Textual's own driver asks the terminal for every mouse motion (``?1003h``, any-event
tracking): each move of the pointer over the window is a report on the wire, up the ssh link
and through the app's loop. The console reads no hover, so it asks for presses, releases
and the wheel (``?1000h``, with the SGR encoding) unless ``--mouse-motion`` is given.

Textual writes every segment of a line as ``ESC[<style>m text ESC[0m``: a row of 100 blank
cells, or of 100 bars of one colour, is 100 segments, each with its style and its reset, up
to 25 bytes around each cell. ``merge_sgr`` drops a reset that is followed at once by the
very style it ended (the terminal's state is the same either way), so a run of one style is
sent as one sequence, its text and one reset (4 to 20 times fewer bytes per repaint).
"""

from __future__ import annotations

import re

from textual import constants
from textual.driver import Driver

MOTION_ON = "\x1b[?1003h"
RESET_THEN = "\x1b[0m\x1b["
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def merge_sgr(data: str) -> str:
    """``data`` with each ``ESC[0m ESC[<s>m`` removed where ``<s>`` is the style that the
    reset ended (set right after a reset, so it is the terminal's whole state): the bytes
    that reach the terminal draw the same cells in the same styles."""
    if RESET_THEN not in data:
        return data
    parts: list[str] = []
    last = 0
    state: str | None = None  # None: not known; "": the default (after a reset); else the one style set
    matches = list(_SGR.finditer(data))
    i = 0
    while i < len(matches):
        m = matches[i]
        params = m.group(1)
        if params in ("0", ""):
            nxt = matches[i + 1] if i + 1 < len(matches) else None
            if state and nxt is not None and nxt.start() == m.end() and nxt.group(1) == state:
                parts.append(data[last : m.start()])
                last = nxt.end()
                i += 2
                continue
            state = ""
        else:
            state = params if state == "" else None  # on top of an unknown or another style: not known
        i += 1
    parts.append(data[last:])
    return "".join(parts)


def driver_class(motion: bool) -> type[Driver] | None:
    """The driver for this terminal; None: Textual's choice (Windows or TEXTUAL_DRIVER set)."""
    if constants.DRIVER is not None:
        return None
    try:
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:  # Windows: no termios
        return None

    class ConsoleDriver(LinuxDriver):
        """LinuxDriver that merges runs of one style; without motion tracking unless asked."""

        def write(self, data: str) -> None:
            super().write(merge_sgr(data))

        def _enable_mouse_support(self) -> None:
            if motion:
                super()._enable_mouse_support()
                return
            if not self._mouse:
                return
            self.write("\x1b[?1000h")  # presses, releases, the wheel
            self.write("\x1b[?1015h")
            self.write("\x1b[?1006h")  # SGR encoding
            self.flush()

    return ConsoleDriver
