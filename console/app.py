"""The specconsole Textual app: one screen over one session (``SessionLike``).

The app subscribes to the session (callbacks arrive on the app's loop and are re-posted as
``SnapshotChanged`` / ``LogsAppended`` messages, which coalesce) and keeps its typed snapshot in one reactive, ``snapshot``; the
panels are bound to it and redraw the part they show when that part changes. Keys become
session calls in workers so the UI never blocks; the log keys live on the log view.
Widgets never talk HTTP or read files.
"""
from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Awaitable, Iterable
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.reactive import var
from textual.screen import ModalScreen, Screen

from console.actions.advice import AdviceActions
from console.actions.server import ControlActions
from console.actions.table import ACTIONS, BINDING_IDS, NEEDS_OWNER, bindings_for
from console.driver import driver_class
from console.messages import LogsAppended, SnapshotChanged
from console.palette import ConsoleCommands, system_commands
from console.prefs import load_keymap, load_theme, save_theme
from console.screens.confirm import confirm, quit_choice
from console.screens.help import HelpScreen
from console.screens.main import MainScreen
from console.widgets.footer import KeysFooter
from console.widgets.gpu_table import GpuTable
from console.widgets.live_panel import LivePanel
from console.widgets.log.pane import LogPane
from console.widgets.log.view import LogView
from console.widgets.status_bar import StatusBar
from console.widgets.timeline import SwitchTimeline
from console.widgets.verify_panel import VerifyPanel
from server_control.model.operation import OperationResult
from server_control.model.snapshot import EMPTY_SNAPSHOT, SessionSnapshot
from server_control.model.vocabulary import FINAL_STATES, STOPPED_STATES
from server_control.session.api import SessionLike

CSS_FILE = Path(__file__).with_name("specconsole.tcss")
OUR_ACTIONS = {a.action for a in ACTIONS if a.owner == "app"}
SNAPSHOT_EVERY_S = 0.25   # at most four snapshot builds a second, however many events


class SpecConsoleApp(ControlActions, AdviceActions, App):
    TITLE = "specconsole"
    CSS_PATH = str(CSS_FILE)
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide"), (180, "-very-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    snapshot: var[SessionSnapshot] = var(EMPTY_SNAPSHOT)

    def __init__(self, session: SessionLike, *, what: str = "server", launch: str = "never",
                 start_session: bool = True, notice: str = "", remember_theme: bool = False,
                 mouse_motion: bool = False) -> None:
        # named colours = the terminal's own 16 (TERM=xterm); the mouse: clicks and wheel only
        super().__init__(ansi_color=True, driver_class=driver_class(mouse_motion))
        self.session = session
        self.what = what                # "server" or "simulator" (wording of questions)
        self.launch_mode = launch       # no live run at start: "never", "offer" (ask), "auto"
        self.start_session = start_session
        self.notice = notice            # shown as a warning once the screen is up
        self.remember_theme = remember_theme   # the user's preferences: theme, keymap (console/prefs.py)
        self.farewell = ""              # printed by the command after the screen closes
        self._desired: int | None = None
        self._control_lock = asyncio.Lock()
        self._loop_thread = threading.get_ident()
        self._built_at = 0.0            # monotonic time of the last snapshot build
        self._snapshot_due = False      # a build is scheduled (on_snapshot_changed)

    # ---- layout and session wiring ---------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status").data_bind(SpecConsoleApp.snapshot)
        with Horizontal(id="top"):
            yield LivePanel(id="live").data_bind(SpecConsoleApp.snapshot)
            yield SwitchTimeline(id="timeline").data_bind(SpecConsoleApp.snapshot)
            yield VerifyPanel(id="verify").data_bind(SpecConsoleApp.snapshot)
        yield GpuTable(id="gpus").data_bind(SpecConsoleApp.snapshot)
        yield LogPane(self.session.store, id="logs")
        yield KeysFooter()

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        return system_commands(self, super().get_system_commands(screen))

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    def action_owner(self, owner: str) -> DOMNode:
        """The widget that runs the actions of ``owner`` (console/actions/table.py)."""
        return self.log_view if owner == "log" else self

    async def on_mount(self) -> None:
        self._loop_thread = threading.get_ident()
        if self.remember_theme:
            theme = load_theme()
            if theme in self.available_themes:
                self.theme = theme
            self.theme_changed_signal.subscribe(self, lambda t: save_theme(t.name))
            keymap, problems = load_keymap(BINDING_IDS)
            self.set_keymap(keymap)
            if problems:
                self.notify("; ".join(problems), severity="warning", timeout=20)
        self.log_view.focus()
        self.session.subscribe(self._on_session)
        self.refresh_snapshot()
        if self.notice:
            self.notify(self.notice, severity="warning", timeout=20)
        if self.start_session:
            self.run_worker(self._start_session(), group="session")

    async def _start_session(self) -> None:
        try:
            await self.session.start()
        except Exception as exc:  # noqa: BLE001 - shown, never fatal to the screen
            self.notify(f"session failed to start: {exc}", severity="error", timeout=10)
        if self.log_view.store is not self.session.store:
            self.log_view.set_store(self.session.store)
        self.refresh_snapshot()
        self.log_view.notify_new()
        # Everything built so far (Textual, widgets, modules) lives as long as the app: keep
        # it out of the collector's full passes, which otherwise stall the UI ~50-150 ms.
        gc.freeze()
        snap = self.snapshot
        if (snap.run.state is None or snap.run.state in STOPPED_STATES) and not snap.attached:
            if self.launch_mode == "auto":
                self.action_start_server()
            elif self.launch_mode == "offer":
                self.push_screen(confirm(f"No {self.what} is running for this profile. Launch it now?",
                                         default_yes=True), self._launch_answer)

    def _launch_answer(self, yes: bool | None) -> None:
        if yes:
            self.action_start_server()

    def _on_session(self, topic: str) -> None:
        message = LogsAppended() if topic == "logs" else SnapshotChanged()
        if threading.get_ident() != self._loop_thread:
            self.call_from_thread(self.post_message, message)
        else:
            self.post_message(message)

    def on_logs_appended(self, _message: LogsAppended) -> None:
        self.log_view.notify_new()

    def on_snapshot_changed(self, _message: SnapshotChanged) -> None:
        """Build the snapshot now, or, within SNAPSHOT_EVERY_S of the last build, once at the
        end of that interval: a burst of polls, NVML samples and run changes is one build."""
        if self._snapshot_due:
            return
        wait = self._built_at + SNAPSHOT_EVERY_S - time.monotonic()
        if wait <= 0:
            self.refresh_snapshot()
        else:
            self._snapshot_due = True
            self.set_timer(wait, self.refresh_snapshot)

    def refresh_snapshot(self) -> None:
        """Read the session's snapshot into the ``snapshot`` reactive (the panels follow)."""
        self._snapshot_due = False
        self._built_at = time.monotonic()
        try:
            self.snapshot = self.session.snapshot()
        except Exception as exc:  # noqa: BLE001
            self.notify(f"snapshot failed: {exc}", severity="error")

    def watch_snapshot(self, old: SessionSnapshot, snap: SessionSnapshot) -> None:
        for view in self.query(LogView):   # ctrl+s names its file after the profile
            view.save_name = snap.profile or "log"
        if old.attached != snap.attached:
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in OUR_ACTIONS and isinstance(self.screen, ModalScreen):
            return False
        if action in NEEDS_OWNER and self.snapshot.attached:
            return False   # not this console's server: the footer does not offer them
        return True

    async def _call(self, what: str, call: Awaitable[OperationResult]) -> OperationResult | None:
        """Await a session call; a raised error or a result not done becomes a toast."""
        try:
            result = await call
        except Exception as exc:  # noqa: BLE001
            self.notify(f"{what} failed: {exc}", severity="error", timeout=8)
            return None
        finally:
            self.refresh_snapshot()
        if not result.done:
            self.notify(f"{what} {result.outcome}: {result.message or 'no reason given'}", severity="error",
                        timeout=10)
        return result

    def action_verify(self) -> None:
        async def run() -> None:
            result = await self._call("verify", self.session.verify())
            if result is not None and result.verification is not None:
                self.notify(f"verification: {result.verification.summary}")
        self.run_worker(run(), group="verify")

    # ---- console ---------------------------------------------------------------------
    def action_toggle_panels(self) -> None:
        self.screen.toggle_class("-show-panels")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Textual's own quit (ctrl+q) asks the same question as `q`."""
        self.action_quit_console()

    def action_quit_console(self) -> None:
        if self.snapshot.attached:
            self.run_worker(self._quit(False), group="quit")
            return
        self.push_screen(quit_choice(self.what),
                         self._quit_answer)

    def _quit_answer(self, choice: object) -> None:
        if choice:
            self.run_worker(self._quit(choice == "stop"), group="quit")

    async def _quit(self, stop: bool) -> None:
        run = self.snapshot.run
        try:
            await self.session.close(stop_server=stop)
        except Exception as exc:  # noqa: BLE001 - the screen closes anyway; say why
            self.notify(f"close failed: {exc}", severity="error", timeout=8)
        if stop:
            self.farewell = f"specconsole: {self.what} stopped."
        elif run.pid and run.state is not None and run.state not in FINAL_STATES:
            self.farewell = (f"specconsole: {self.what} left running: pid {run.pid}, port "
                             f"{run.port}, log {run.log_path}")
        self.exit(return_code=0)
