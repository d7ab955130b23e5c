"""The specconsole Textual apps: what every console screen shares (``ConsoleApp``: the
stylesheet, the breakpoints, the driver, the theme and keymap from the preferences, the
palette's system commands, SIGHUP), and the single-server app (``SpecConsoleApp``), whose
one screen is a ``ServerScreen`` over its session (console/screens/server.py). The fleet's
app is console/fleet/app.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.screen import Screen

from console import hangup
from console.driver import driver_class
from console.exit_watchdog import ExitWatchdog
from console.keys import BINDING_IDS
from console.palette import system_commands
from console.prefs import load_keymap, load_theme, save_theme
from console.screens.server import ServerScreen
from console.widgets.log.view import LogView
from server_control.model.snapshot import SessionSnapshot
from server_control.session.api import SessionLike

CSS_FILE = Path(__file__).with_name("specconsole.tcss")


class ConsoleApp(App[str]):
    """The app's result is the farewell line the command prints after the screen closes."""

    TITLE = "specconsole"
    CSS_PATH = str(CSS_FILE)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide"), (180, "-very-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    def __init__(self, *, notice: str = "", remember_theme: bool = False, mouse_motion: bool = False) -> None:
        # named colours = the terminal's own 16 (TERM=xterm); the mouse: clicks and wheel only
        super().__init__(ansi_color=True, driver_class=driver_class(mouse_motion))
        self.notice = notice  # shown as a warning once the screen is up
        self.remember_theme = remember_theme  # the user's preferences: theme, keymap (console/prefs.py)
        self.hung_up = False  # the terminal went away (SIGHUP): left as `q` + Enter
        self.exit_watchdog: ExitWatchdog | None = None  # set by the command: armed on SIGHUP

    @property
    def farewell(self) -> str:
        """Printed by the command after the screen closes ("" when there is nothing to say)."""
        return self.return_value or ""

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        return system_commands(self, super().get_system_commands(screen))

    async def on_mount(self) -> None:
        if self.remember_theme:
            theme = load_theme()
            if theme in self.available_themes:
                self.theme = theme
            self.theme_changed_signal.subscribe(self, lambda t: save_theme(t.name))
            keymap, problems = load_keymap(BINDING_IDS)
            self.set_keymap(keymap)
            if problems:
                self.notify("; ".join(problems), severity="warning", timeout=20)
        hangup.install(self._on_hangup, self._arm_exit_watchdog)
        if self.notice:
            self.notify(self.notice, severity="warning", timeout=20)

    def _on_hangup(self) -> None:
        """SIGHUP: the terminal is gone. Leave the servers running, as `q` + Enter does."""
        if not self.hung_up:
            self.hung_up = True
            self.hang_up()

    def _arm_exit_watchdog(self) -> None:
        """In the SIGHUP handler itself (the loop may be blocked on the dead terminal)."""
        if self.exit_watchdog is not None:
            self.exit_watchdog.arm()

    def hang_up(self) -> None:
        raise NotImplementedError


class SpecConsoleApp(ConsoleApp):
    """One ``ServerScreen`` over ``session``; `q` (or ctrl+q) on it closes the session and
    ends the app."""

    def __init__(
        self,
        session: SessionLike,
        *,
        what: str = "server",
        launch: str = "never",
        start_session: bool = True,
        notice: str = "",
        remember_theme: bool = False,
        mouse_motion: bool = False,
    ) -> None:
        super().__init__(notice=notice, remember_theme=remember_theme, mouse_motion=mouse_motion)
        self.session = session
        self.server = ServerScreen(session, what=what, launch=launch, start_session=start_session, id="_default")

    def get_default_screen(self) -> Screen:
        return self.server

    @property
    def snapshot(self) -> SessionSnapshot:
        """The server screen's snapshot."""
        return self.server.snapshot

    @property
    def log_view(self) -> LogView:
        """The server screen's log view."""
        return self.server.log_view

    async def action_quit(self) -> None:
        """Textual's own quit (ctrl+q) asks the same question as `q`."""
        self.server.action_quit_console()

    def hang_up(self) -> None:
        self.server.leave(stop=False)
