"""The fleet's `enter` pushes a server screen over that member's own session (no proxy):
it listens to that member only and only while it is shown; `escape` comes back to the fleet
table, `q` there comes back with the fleet's question; the member's keys reach the member's
session; the screen never starts or closes a member's session (the fleet does). Pilot over
fake members (the end-to-end fleet test, with real servers, is test_screen.py)."""

from __future__ import annotations

from types import SimpleNamespace

from console.dialogs.confirm import ChoiceScreen
from console.fleet.app import FleetApp
from console.fleet.member_screen import MemberScreen
from console.fleet.screen import FleetScreen
from server_control.fleet.member import MemberRow
from server_control.fleet.spec import parse_fleet
from tests.console.fakes import FakeSession
from tests.console.screen_text import wait_for


class _Member:
    def __init__(self, name: str) -> None:
        self.name = name
        self.spec = SimpleNamespace(kind="remote")  # nothing to hand off on quit
        self.session = FakeSession()
        self.session.snap["url"] = self.session.url = f"http://127.0.0.1:9/{name}"


class _FakeFleet:
    """The part of a Fleet the fleet app reads: members with sessions, rows, no gateway."""

    def __init__(self, names) -> None:
        self.members = {n: _Member(n) for n in names}
        self.spec = parse_fleet({"name": "two", "members": {"x": {"url": "http://127.0.0.1:9"}}})
        self.gateway = self.gateway_status = None

    def rows(self):
        return tuple(
            MemberRow(name=n, kind="local", host="local", state="ready", reachable=True, threshold=5) for n in self.members
        )


def _subscribed(fleet) -> dict[str, int]:
    return {n: len(m.session.subscribers) for n, m in fleet.members.items()}


async def test_enter_pushes_a_screen_over_that_members_session_and_escape_comes_back():
    fleet = _FakeFleet(["a", "b"])
    app = FleetApp(fleet, start_fleet=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.fleet_screen.order == ["a", "b"], "the rows")
        assert isinstance(app.screen, FleetScreen) and _subscribed(fleet) == {"a": 0, "b": 0}

        app.fleet_screen.table.move_cursor(row=1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MemberScreen), "b's screen")
        screen = app.screen
        assert screen.member == "b" and screen.session is fleet.members["b"].session
        assert _subscribed(fleet) == {"a": 0, "b": 1}, "the screen hears its member only"
        assert screen.snapshot.url == "http://127.0.0.1:9/b"

        await pilot.press("plus")  # N+1 on b: b's session, not a's
        await wait_for(pilot, lambda: fleet.members["b"].session.calls == [("set_threshold", 6)], "N+1 on b")
        assert fleet.members["a"].session.calls == []

        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), "back to the fleet")
        assert _subscribed(fleet) == {"a": 0, "b": 0}, "a screen no longer shown hears nothing"

        app.fleet_screen.table.move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MemberScreen) and app.screen.member == "a", "a's screen")
        assert app.screen is not screen and _subscribed(fleet) == {"a": 1, "b": 0}

        assert "escape or q: back to the fleet" in app.screen.sub_title
        await pilot.press("q")  # a member's q goes back, as escape: it never offers to stop the fleet
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), "back to the fleet (q)")
        assert _subscribed(fleet) == {"a": 0, "b": 0}
        await pilot.pause()
        assert not any(isinstance(s, ChoiceScreen) for s in app.screen_stack)

        await pilot.press("enter", "ctrl+q")  # Textual's quit asks the same, from a member's screen too
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the fleet's quit question (ctrl+q)")
        assert isinstance(app.screen_stack[-2], FleetScreen)
        await pilot.press("escape")
    for m in fleet.members.values():  # the fleet's sessions are the fleet's to start and close
        assert not m.session.started and m.session.closed_with is None
