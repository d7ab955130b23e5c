"""The fleet console: the fleet screen over today's single-server screen.

``FleetApp`` is the single-server app (``console.app.SpecConsoleApp``) whose
session is a ``SessionProxy``: ``enter`` on a fleet row points the proxy at that member's
session and shows the single-server screen for it; ``escape`` there (when the log view has
no filter or search left to clear) comes back to the fleet. The fleet's sessions are
started and closed by the ``Fleet``, not by the screen.
"""
from __future__ import annotations

from typing import cast

from textual.binding import Binding

from console.app import OUR_ACTIONS, SpecConsoleApp
from console.fleet.screen import FleetScreen

FLEET_SCREEN = "fleet"


class SessionProxy:
    """Stands for one member's session at a time; subscribers hear only that member."""

    def __init__(self, fleet) -> None:
        self.fleet = fleet
        self.name = next(iter(fleet.members))
        self.muted = False   # the fleet screen is up: the single-server screen needs no updates
        self._subs: list = []
        for member in fleet.members.values():
            member.session.subscribe(lambda topic, name=member.name: self._forward(name, topic))

    @property
    def target(self):
        return self.fleet.members[self.name].session

    def show(self, name: str) -> None:
        self.name = name

    def _forward(self, name: str, topic: str) -> None:
        if name == self.name and not self.muted:
            for cb in list(self._subs):
                cb(topic)

    def subscribe(self, callback):
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def __getattr__(self, attr):
        return getattr(self.target, attr)


class FleetApp(SpecConsoleApp):
    """``on_start(app)`` runs (in a worker) once the fleet started; ``on_exit(app)`` before the
    fleet closes when the app exits (the servers keep running unless it stops them)."""

    BINDINGS = [*SpecConsoleApp.BINDINGS, Binding("escape", "back_to_fleet", "Fleet", show=False)]

    def __init__(self, fleet, *, start_fleet: bool = True, notice: str = "", on_start=None, on_exit=None,
                 stops_on_quit: bool = False) -> None:
        self.fleet = fleet
        self.proxy = SessionProxy(fleet)
        super().__init__(self.proxy, start_session=False, launch="never", notice=notice)
        self.start_fleet = start_fleet
        self.stops_on_quit = stops_on_quit   # the demo without --keep: on_exit stops everything
        self.leaving = False   # quit leaving the fleet running: hand its local members off (console/fleet/leaving.py)
        self.on_start, self.on_exit = on_start, on_exit

    async def on_mount(self) -> None:
        await super().on_mount()
        self.install_screen(FleetScreen(self.fleet, self.show_member), name=FLEET_SCREEN)
        self.show_fleet()
        if self.start_fleet:
            self.run_worker(self._start_fleet(), group="fleet")

    async def _start_fleet(self) -> None:
        try:
            await self.fleet.start()
            if self.on_start is not None:
                await self.on_start(self)
        except Exception as exc:  # noqa: BLE001 - shown, never fatal to the screen
            self.notify(f"fleet failed to start: {exc}", severity="error", timeout=10)

    async def on_unmount(self) -> None:
        """The fleet's sessions live on this app's loop: close them before it ends."""
        try:
            if self.on_exit is not None:
                await self.on_exit(self)
        finally:
            if self.start_fleet:
                await self.fleet.close()

    @property
    def fleet_screen(self) -> FleetScreen:
        return cast(FleetScreen, self.get_screen(FLEET_SCREEN))

    def show_fleet(self) -> None:
        self.proxy.muted = True
        self.push_screen(FLEET_SCREEN)

    def show_member(self, name: str) -> None:
        """The single-server screen, for member ``name``."""
        self.proxy.show(name)
        self.proxy.muted = False
        self.log_view.set_store(self.proxy.store)
        self.refresh_snapshot()
        self.sub_title = f"member {name} of fleet {self.fleet.spec.name} (escape: back to the fleet)"
        if self.screen is self.fleet_screen:
            self.pop_screen()
        self.log_view.focus()

    def action_back_to_fleet(self) -> None:
        """escape: the log view clears its filter or search first (console/widgets/log/view.py);
        with nothing left to clear the key comes here."""
        if not isinstance(self.screen, FleetScreen):
            self.show_fleet()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in OUR_ACTIONS and isinstance(self.screen, FleetScreen):
            return False   # the single-server keys act on one member: not from the fleet table
        return super().check_action(action, parameters)

    async def action_quit(self) -> None:
        if isinstance(self.screen, FleetScreen):
            self.fleet_screen.action_quit_fleet()
        else:
            await super().action_quit()

    def action_quit_console(self) -> None:
        """`q` on a member's screen: the fleet's question (the fleet owns the sessions)."""
        self.show_fleet()
        self.fleet_screen.action_quit_fleet()

    def _hang_up(self) -> None:
        """SIGHUP: the terminal is gone; leave the fleet running, handed off (as `q` + Enter)."""
        if not self.hung_up:
            self.hung_up = True
            self.leaving = True
            self.exit()
