"""The terminal driver: Textual's, with the mouse reporting clicks and the wheel only.

Textual's own driver asks the terminal for every mouse motion (``?1003h``, any-event
tracking): each move of the pointer over the window is a report on the wire, up the ssh link
and through the app's loop. The console reads no hover, so it asks for presses, releases
and the wheel (``?1000h``, with the SGR encoding) unless ``--mouse-motion`` is given.
"""
from __future__ import annotations

from textual import constants
from textual.driver import Driver

MOTION_ON = "\x1b[?1003h"


def driver_class(motion: bool) -> type[Driver] | None:
    """The driver for this terminal; None: Textual's choice (Windows, TEXTUAL_DRIVER set, or
    motion wanted)."""
    if motion or constants.DRIVER is not None:
        return None
    try:
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:   # Windows: no termios
        return None

    class ClickMouseDriver(LinuxDriver):
        """LinuxDriver without any-event (motion) tracking."""

        def _enable_mouse_support(self) -> None:
            if not self._mouse:
                return
            self.write("\x1b[?1000h")  # presses, releases, the wheel
            self.write("\x1b[?1015h")
            self.write("\x1b[?1006h")  # SGR encoding
            self.flush()

    return ClickMouseDriver
