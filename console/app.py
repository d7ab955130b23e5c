"""The specconsole Textual app: one screen over one ``Session``.

The app subscribes to the session (callbacks arrive on the app's loop and are re-posted as
``SessionEvent`` messages), hands the snapshot to the panels, and turns keys into session
calls in workers so the UI never blocks. Widgets never talk HTTP or read files.
"""
from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import Footer

from console.bindings import ACTIONS, textual_bindings
from console.messages import SessionEvent
from console.screens.confirm import confirm, quit_choice
from console.screens.help import HelpScreen
from console.palette import ConsoleCommands
from console.screens.prompt import PromptScreen
from console.widgets.fmt import section
from console.widgets.gpu_table import GpuTable
from console.widgets.live_panel import LivePanel
from console.widgets.log_actions import LogActions
from console.widgets.log_pane import LogPane
from console.widgets.log_view import LogView
from console.widgets.status_bar import StatusBar
from console.widgets.timeline import ModeTimeline
from console.widgets.verify_panel import VerifyPanel
from server_control.decision import FORCE_CHOICES, validate_threshold

CSS_FILE = Path(__file__).with_name("specconsole.tcss")
OUR_ACTIONS = {a.action for a in ACTIONS}


class SpecConsoleApp(LogActions, App):
    TITLE = "specconsole"
    CSS_PATH = str(CSS_FILE)
    BINDINGS = textual_bindings()
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    def __init__(self, session, *, what: str = "server", quit_stops: bool = False,
                 launch: str = "never", start_session: bool = True, notice: str = "") -> None:
        super().__init__()
        self.session = session
        self.what = what                # "server" or "simulator" (wording of questions)
        self.quit_stops = quit_stops    # default answer of the quit question
        self.launch_mode = launch       # no live run at start: "never", "offer" (ask), "auto"
        self.start_session = start_session
        self.notice = notice            # shown as a warning once the screen is up
        self.farewell = ""              # printed by the command after the screen closes
        self.snap: dict = {}
        self._desired: int | None = None
        self._control_lock = asyncio.Lock()
        self._loop_thread = threading.get_ident()

    # ---- layout and session wiring ---------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="top"):
            yield LivePanel(id="live")
            yield ModeTimeline(id="timeline")
            yield VerifyPanel(id="verify")
        yield GpuTable(id="gpus")
        yield LogPane(getattr(self.session, "store", None), id="logs")
        yield Footer()

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    async def on_mount(self) -> None:
        self._loop_thread = threading.get_ident()
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
        store = getattr(self.session, "store", None)
        if store is not None and self.log_view.store is not store:
            self.log_view.set_store(store)
        self.refresh_snapshot()
        self.log_view.notify_new()
        # Everything built so far (Textual, widgets, modules) lives as long as the app: keep
        # it out of the collector's full passes, which otherwise stall the UI ~50-150 ms.
        gc.freeze()
        state = section(self.snap, "run").get("state")
        if state in (None, "stopped", "crashed", "fatal") and not self.snap.get("attached"):
            if self.launch_mode == "auto":
                self.action_start_server()
            elif self.launch_mode == "offer":
                self.push_screen(confirm(f"No {self.what} is running for this profile. Launch it now?",
                                         default_yes=True), self._launch_answer)

    def _launch_answer(self, yes: bool | None) -> None:
        if yes:
            self.action_start_server()

    def _on_session(self, topic: str) -> None:
        if threading.get_ident() != self._loop_thread:
            self.call_from_thread(self.post_message, SessionEvent(topic))
        else:
            self.post_message(SessionEvent(topic))

    def on_session_event(self, event: SessionEvent) -> None:
        if event.topic == "logs":
            self.log_view.notify_new()
        else:
            self.refresh_snapshot()

    def refresh_snapshot(self) -> None:
        try:
            snap = self.session.snapshot()
        except Exception as exc:  # noqa: BLE001
            self.notify(f"snapshot failed: {exc}", severity="error")
            return
        if not isinstance(snap, dict):
            return
        self.snap = snap
        for widget in self.query("StatusBar, LivePanel, ModeTimeline, GpuTable, VerifyPanel"):
            widget.show(snap)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in OUR_ACTIONS and isinstance(self.screen, ModalScreen):
            return False
        return True

    async def _call(self, what: str, coro):
        """Await a session call; any failure (raised or ``{"ok": false}``) becomes a toast."""
        try:
            result = await coro
        except Exception as exc:  # noqa: BLE001
            self.notify(f"{what} failed: {exc}", severity="error", timeout=8)
            return None
        finally:
            self.refresh_snapshot()
        if isinstance(result, dict) and result.get("ok") is False:
            why = result.get("error") or result.get("message") or "no reason given"
            self.notify(f"{what} failed: {why}", severity="error", timeout=10)
        return result

    # ---- threshold and force ---------------------------------------------------------
    def _current_threshold(self) -> int | None:
        if self._desired is not None:
            return self._desired
        change = section(self.snap, "threshold_change")
        if change.get("state") == "pending" and isinstance(change.get("requested"), int):
            return change["requested"]
        n = section(self.snap, "spec").get("threshold")
        return n if isinstance(n, int) and not isinstance(n, bool) else None

    def request_threshold(self, value) -> None:
        try:
            n = validate_threshold(value)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        self._desired = n
        self.run_worker(self._apply_threshold(n), group="control")

    async def _apply_threshold(self, n: int) -> None:
        async with self._control_lock:
            if self._desired != n:
                return  # superseded by a later key press
            result = await self._call("set threshold", self.session.set_threshold(n))
            if self._desired == n:
                self._desired = None
        state = (result or {}).get("state") if isinstance(result, dict) else None
        if state in ("refused", "unsupported", "error"):
            self.notify(f"threshold {n} {state}: {result.get('detail') or ''}", severity="error", timeout=8)

    def _step_threshold(self, delta: int) -> None:
        n = self._current_threshold()
        if n is None:
            self.notify("threshold unknown yet (server not read)", severity="warning")
            return
        self.request_threshold(max(0, n + delta))

    def action_threshold_up(self) -> None:
        self._step_threshold(+1)

    def action_threshold_down(self) -> None:
        self._step_threshold(-1)

    def action_threshold_prompt(self) -> None:
        n = self._current_threshold()
        self.push_screen(PromptScreen("Threshold N (speculate while decode batch <= N; 0 = never disable)",
                                      validate_threshold, "" if n is None else str(n),
                                      hint="enter applies, escape cancels"),
                         lambda v: v is not None and self.request_threshold(v))

    def action_cycle_force(self) -> None:
        force = section(self.snap, "spec").get("force") or "auto"
        nxt = FORCE_CHOICES[(FORCE_CHOICES.index(force) + 1) % len(FORCE_CHOICES)] \
            if force in FORCE_CHOICES else "auto"
        self.run_worker(self._force(nxt), group="control")

    async def _force(self, mode: str) -> None:
        result = await self._call("force mode", self.session.set_force(mode))
        if isinstance(result, dict) and result.get("state") in ("refused", "unsupported", "error"):
            self.notify(f"force {mode} {result['state']}: {result.get('detail') or ''}", severity="error")
        elif result is not None:
            self.notify(f"force mode: {mode.replace('_', '-')}")

    # ---- server ----------------------------------------------------------------------
    def _owned(self) -> bool:
        if self.snap.get("attached"):
            self.notify("attached to a server this console does not own: start/stop/restart "
                        "are not available", severity="warning")
            return False
        return True

    def action_start_server(self) -> None:
        if self._owned():
            self.run_worker(self._call("launch", self.session.launch()), group="server")

    def action_stop_server(self) -> None:
        if self._owned():
            self.push_screen(confirm(f"Stop the {self.what}?"), lambda yes: yes and self.run_worker(
                self._call("stop", self.session.stop()), group="server"))

    def action_restart_server(self) -> None:
        if self._owned():
            self.push_screen(confirm(f"Restart the {self.what}?"), lambda yes: yes and self.run_worker(
                self._call("restart", self.session.restart()), group="server"))

    def action_verify(self) -> None:
        async def run() -> None:
            result = await self._call("verify", self.session.verify())
            if isinstance(result, dict):
                self.notify(f"verification: {result.get('summary', '?')}")
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
        if self.snap.get("attached"):
            self.run_worker(self._quit(False), group="quit")
            return
        self.push_screen(quit_choice(self.what, self.quit_stops),
                         lambda c: c and self.run_worker(self._quit(c == "stop"), group="quit"))

    async def _quit(self, stop: bool) -> None:
        run = section(self.snap, "run")
        await self._call("close", self.session.close(stop_server=stop))
        if stop:
            self.farewell = f"specconsole: {self.what} stopped."
        elif run.get("pid") and run.get("state") not in ("stopped", "fatal", None):
            self.farewell = (f"specconsole: {self.what} left running: pid {run.get('pid')}, port "
                             f"{run.get('port')}, log {run.get('log_path')}")
        self.exit(return_code=0)
