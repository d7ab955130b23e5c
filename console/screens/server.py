"""The server screen: the panels and the log over one session (``SessionLike``), as
posting's main screen. The single-server app shows one as its default screen; the fleet
pushes one per member (console/fleet/member_screen.py).

The screen subscribes to its session while it is mounted (callbacks arrive on the app's
loop and are re-posted as ``SnapshotChanged`` / ``LogsAppended`` messages, which coalesce)
and keeps the typed snapshot in one reactive, ``snapshot``; the panels are bound to it and
redraw the part they show when that part changes. Keys (bound here, from the actions
table) become session calls in workers so the UI never blocks; the log keys live on the log
view. Widgets never talk HTTP or read files.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Awaitable

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.reactive import var
from textual.screen import ModalScreen, Screen

from console.dialogs.confirm import confirm, kept_by, quit_choice
from console.keys import NEEDS_OWNER, bindings_for, footer_rank
from console.messages import LogsAppended, SnapshotChanged
from console.palette import ConsoleCommands
from console.screens.advice_actions import AdviceActions
from console.screens.chart_actions import ChartActions
from console.screens.control_actions import ControlActions
from console.screens.details import DetailsScreen, details_text
from console.screens.help import HelpScreen
from console.widgets.advice_strip import AdviceStrip
from console.widgets.footer import KeysFooter
from console.widgets.gpu_table import GpuTable
from console.widgets.latency_line import LatencyLine
from console.widgets.live_panel import LivePanel
from console.widgets.log.pane import LogPane
from console.widgets.log.view import LogView
from console.widgets.mode_reason import ModeReason
from console.widgets.status_bar import StatusBar
from console.widgets.timeline import SwitchTimeline
from console.widgets.verify_panel import VerifyPanel
from server_control.model.operation import OperationResult
from server_control.model.snapshot import EMPTY_SNAPSHOT, SessionSnapshot
from server_control.model.vocabulary import FINAL_STATES, STOPPED_STATES
from server_control.session.api import SessionLike

SNAPSHOT_EVERY_S = 0.25  # at most four snapshot builds a second, however many events


class ServerScreen(ControlActions, AdviceActions, ChartActions, Screen):
    BINDINGS = bindings_for("screen")
    COMMANDS = {ConsoleCommands}

    snapshot: var[SessionSnapshot] = var(EMPTY_SNAPSHOT)

    def __init__(
        self,
        session: SessionLike,
        *,
        what: str = "server",
        launch: str = "never",
        start_session: bool = True,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.session = session
        self.what = what  # "server" or "simulator" (wording of questions)
        self.launch_mode = launch  # no live run at start: "never", "offer" (ask), "auto"
        self.start_session = start_session  # False: someone else (the fleet) starts and closes it
        self._desired: int | None = None
        self._control_lock = asyncio.Lock()
        self._loop_thread = threading.get_ident()
        self._unsubscribe = lambda: None
        self._built_at = 0.0  # monotonic time of the last snapshot build
        self._snapshot_due = False  # a build is scheduled (on_snapshot_changed)

    # ---- layout and session wiring ---------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status").data_bind(ServerScreen.snapshot)
        yield ModeReason(id="mode-reason").data_bind(ServerScreen.snapshot)
        with Horizontal(id="top"):
            yield LivePanel(self.session.history, id="live").data_bind(ServerScreen.snapshot)
            yield SwitchTimeline(id="timeline").data_bind(ServerScreen.snapshot)
            yield VerifyPanel(id="verify").data_bind(ServerScreen.snapshot)
        yield GpuTable(id="gpus").data_bind(ServerScreen.snapshot)
        yield LatencyLine(id="latency").data_bind(ServerScreen.snapshot)
        yield AdviceStrip(self.session.advice, id="advice-strip")
        yield LogPane(self.session.store, id="logs")
        yield KeysFooter()

    @property
    def active_bindings(self):  # type: ignore[override]  # same type, our order
        """The footer lists the keys in the order of the actions table (what matters most
        first, so a narrow terminal still shows it), whichever widget owns them; Textual
        would list the focused widget's first."""
        found = super().active_bindings
        return dict(sorted(found.items(), key=lambda item: footer_rank(item[1].binding.action)))

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    def action_owner(self, owner: str) -> DOMNode:
        """The node that runs the actions of ``owner`` (console/keys.py)."""
        return self.log_view if owner == "log" else self.app if owner == "app" else self

    def on_mount(self) -> None:
        self._loop_thread = threading.get_ident()
        self.log_view.focus()
        self._unsubscribe = self.session.subscribe(self._on_session)
        self.refresh_snapshot()
        if self.start_session:
            self.run_worker(self._start_session(), group="session")

    def on_unmount(self) -> None:
        self._unsubscribe()

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
                self.app.push_screen(
                    confirm(f"No {self.what} is running for this profile. Launch it now?", default_yes=True), self._launch_answer
                )

    def _launch_answer(self, yes: bool | None) -> None:
        if yes:
            self.action_start_server()

    def _on_session(self, topic: str) -> None:
        message = LogsAppended() if topic == "logs" else SnapshotChanged()
        if threading.get_ident() != self._loop_thread:
            self.app.call_from_thread(self.post_message, message)
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
        except Exception as exc:  # noqa: BLE001 - a snapshot that fails is a toast, the screen goes on
            self.notify(f"snapshot failed: {exc}", severity="error")

    def watch_snapshot(self, old: SessionSnapshot, snap: SessionSnapshot) -> None:
        for view in self.query(LogView):  # ctrl+s names its file after the profile
            view.save_name = snap.profile or "log"
        for strip in self.query(AdviceStrip):
            strip.threshold_seen(snap.spec.threshold if snap.server.reachable else None)
        if old.attached != snap.attached:
            self.refresh_bindings()
        gone = snap.run.took_over_from
        if gone is not None and old.run.took_over_from is None:  # once: the moment this console took over
            self.notify(
                f"supervising this run now: the previous supervisor (pid {gone.pid}, {gone.kind}) ended without "
                "detaching (killed or crashed), so nobody restarted crashes until now",
                severity="warning",
                timeout=20,
            )

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if isinstance(self.app.screen, ModalScreen):
            return False  # under a question or the help: the footer offers no key of this screen
        if action in NEEDS_OWNER and self.snapshot.attached:
            return False  # not this console's server: the footer does not offer them
        return True

    async def _call(self, what: str, call: Awaitable[OperationResult]) -> OperationResult | None:
        """Await a session call; a raised error or a result not done becomes a toast. The call
        is shielded: leaving the screen (the fleet's escape) does not cut a change in half."""
        try:
            result = await asyncio.shield(call)
        except Exception as exc:  # noqa: BLE001 - any failure of an operator's action is a toast, never a crash
            self.notify(f"{what} failed: {exc}", severity="error", timeout=8)
            return None
        finally:
            self.refresh_snapshot()
        if not result.done:
            self.notify(f"{what} {result.outcome}: {result.message or 'no reason given'}", severity="error", timeout=10)
        return result

    def action_verify(self) -> None:
        async def run() -> None:
            result = await self._call("verify", self.session.verify())
            if result is not None and result.verification is not None:
                self.notify(f"verification: {result.verification.summary}")

        self.run_worker(run(), group="verify")

    # ---- console ---------------------------------------------------------------------
    def action_toggle_panels(self) -> None:
        self.toggle_class("-show-panels")

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_details(self) -> None:
        """`D`: the top lines in full (console/screens/details.py)."""
        strip = self.query_one(AdviceStrip)
        advice = strip.advice.sentence if strip.advice is not None else strip.note
        status = self.query_one(StatusBar).lines
        self.app.push_screen(DetailsScreen(details_text(self.snapshot, status, advice)))

    def action_quit_console(self) -> None:
        """`q`: nothing of ours runs: leave; else ask (leave it running, stop it, stay)."""
        run = self.snapshot.run
        if self.snapshot.attached or not run.pid or run.state is None or run.state in FINAL_STATES:
            self.leave(stop=False)
            return
        self.app.push_screen(quit_choice(self.what, kept_by(run)), self._quit_answer)

    def _quit_answer(self, choice: object) -> None:
        if choice:
            self.leave(stop=choice == "stop")

    def leave(self, *, stop: bool) -> None:
        """Close the session (stopping the server, or leaving it running) and end the app
        with a farewell line (the command prints it)."""
        self.run_worker(self._leave(stop), group="quit")

    async def _leave(self, stop: bool) -> None:
        run = self.snapshot.run
        try:
            await self.session.close(stop_server=stop)
        except Exception as exc:  # noqa: BLE001 - the screen closes anyway; say why
            self.notify(f"close failed: {exc}", severity="error", timeout=8)
        farewell = ""
        if stop:
            farewell = f"specconsole: {self.what} stopped."
        elif run.pid and run.state is not None and run.state not in FINAL_STATES:
            farewell = f"specconsole: {self.what} left running: pid {run.pid}, port {run.port}, log {run.log_path}" + (
                f"; {kept_by(run)}" if run.supervisor is not None else "; nobody restarts a crash (no supervisor)"
            )
        self.app.exit(farewell, return_code=0)
