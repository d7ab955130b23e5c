"""The fleet console: the fleet screen (console/fleet/screen.py) as the app's screen;
``enter`` on a row pushes that member's server screen (console/fleet/member_screen.py) and
``escape`` there comes back. The fleet's sessions are started and closed by the ``Fleet``
(here, once for the app), never by a screen.
"""

from __future__ import annotations

from typing import cast

from textual.screen import Screen

from console.app import ConsoleApp
from console.fleet.member_screen import MemberScreen
from console.fleet.screen import FleetScreen


class FleetApp(ConsoleApp):
    """``on_start(app)`` runs (in a worker) once the fleet started; ``on_exit(app)`` before the
    fleet closes when the app exits (the servers keep running unless it stops them)."""

    def __init__(
        self, fleet, *, start_fleet: bool = True, notice: str = "", on_start=None, on_exit=None, stops_on_quit: bool = False
    ) -> None:
        super().__init__(notice=notice)
        self.fleet = fleet
        self.start_fleet = start_fleet
        self.stops_on_quit = stops_on_quit  # the demo without --keep: on_exit stops everything
        self.leaving = False  # quit leaving the fleet running (console/fleet/leaving.py)
        self.on_start, self.on_exit = on_start, on_exit

    def get_default_screen(self) -> Screen:
        return FleetScreen(self.fleet)

    async def on_mount(self) -> None:
        await super().on_mount()
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
        return cast(FleetScreen, self.screen_stack[0])

    async def action_quit(self) -> None:
        """ctrl+q: the fleet's quit question (from a member's screen: back to the fleet first)."""
        if isinstance(self.screen, MemberScreen):
            self.screen.quit_fleet()
        else:
            self.fleet_screen.action_quit_fleet()

    def hang_up(self) -> None:
        """SIGHUP: leave the fleet running (as `q` + Enter); the demo without
        --keep stops it (as its `q` does)."""
        self.leaving = not self.stops_on_quit
        self.exit()
