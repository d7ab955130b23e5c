"""The fleet console under Pilot: a fleet of simulated replicas behind the real gateway,
one of them on a "remote" host over real SSH, launched, shown, steered and stopped from
one screen; enter opens today's single-server screen for a member, escape comes back."""

from __future__ import annotations

import pytest

from console.fleet.app import FleetApp
from console.fleet.member_screen import MemberScreen
from console.fleet.rows import arrange, cells, matches
from console.fleet.screen import FleetScreen
from server_control.fleet.fleet import Fleet
from server_control.fleet.member import MemberRow
from server_control.fleet.spec import parse_fleet
from tests.console.screen_text import screen_text, wait_for
from tests.fleet.conftest import remote_member, sshd, write_profile  # noqa: F401 (fixture)
from tests.support.sim import free_port


def _row(name, **kw):
    return MemberRow(name=name, kind="local", host=kw.pop("host", "local"), state=kw.pop("state", "ready"), reachable=True, **kw)


def test_sort_filter_and_cells_are_plain_functions():
    rows = [
        _row("b", threshold=4, tok_s=10.0, mode="speculative"),
        _row("a", threshold=9, mode="target_only"),
        _row("c", host="gpu-7", state="no-answer"),
    ]
    assert [r.name for r in arrange(rows)] == ["a", "b", "c"]
    assert [r.name for r in arrange(rows, "threshold", reverse=True)] == ["a", "b", "c"]
    assert [r.name for r in arrange(rows, filter_text="target")] == ["a"]
    assert [r.name for r in arrange(rows, filter_text="!gpu-7")] == ["a", "b"]
    assert not matches(rows[2], "!no-answer") and matches(rows[2], "gpu")
    c = cells(_row("x", threshold=5, force="target_only", mode=None), selected=True)
    assert (c["sel"], c["threshold"], c["mode"], c["tok_s"]) == ("*", "5F", "-", "-")  # F forced, * selected
    assert cells(rows[2], False)["state"].style == "bold red"


def _results(app) -> str:
    return str(app.fleet_screen.query_one("#fleet-results").render())


@pytest.mark.ssh
async def test_fleet_console_end_to_end(sshd, tmp_path):  # noqa: F811
    members = {
        "a": {"profile": str(write_profile(tmp_path, "fa", traffic="wave:10:20"))},
        "b": {"profile": str(write_profile(tmp_path, "fb", traffic="steady:2"))},
        "c": remote_member(sshd, write_profile(tmp_path, "fc", traffic="wave:10:20"), tmp_path / "remote"),
        "gone": {"url": f"http://127.0.0.1:{free_port()}", "gateway": False},
    }
    spec = parse_fleet(
        {
            "name": "pilot",
            "poll_interval_s": 0.5,
            "status_interval_s": 2,
            "members": members,
            "gateway": {"port": free_port(), "health_check_interval_s": 1, "stop_grace_s": 4},
        }
    )
    fleet = Fleet(spec, tmp_path / "local")
    app = FleetApp(fleet)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            screen = app.fleet_screen
            assert isinstance(app.screen, FleetScreen)
            await wait_for(pilot, lambda: screen.order == ["a", "b", "c", "gone"], "four rows")
            await pilot.press("L")  # launch everyone (and the gateway)
            await wait_for(pilot, lambda: "launch on 5:" in _results(app), "launch results", 120)
            assert "4 ok, 1 refused" in _results(app) and "gone: attached by URL" in _results(app)
            await wait_for(pilot, lambda: "3/3 workers healthy" in screen_text(app), "the gateway's workers", 60)
            line = next(x for x in screen_text(app).splitlines() if "gateway workers:" in x)
            assert all(f"{m} ready" in line for m in "abc") and "gone" not in line
            await wait_for(pilot, lambda: all(screen.last_rows[m]["state"].plain == "ready" for m in "abc"), "members ready", 60)
            text = screen_text(app)
            assert sshd.host in text and "no-answer" not in text.split("gone")[0]

            # N on one selected member, then a refused value, then force on all shown
            screen.table.move_cursor(row=1)
            await pilot.press("space", "equals_sign", *"7", "enter")
            await wait_for(pilot, lambda: "threshold 7 on 1: 1 ok" in _results(app), "threshold on b")
            await wait_for(pilot, lambda: [screen.last_rows[m]["threshold"] for m in "abc"] == ["4", "7", "4"], "N read back")
            await pilot.press("escape", "equals_sign", "minus", "3", "enter")
            assert "must be >= 0" in screen_text(app)  # the prompt stays, with the reason
            await pilot.press("escape")
            await pilot.press("F", "t")
            await wait_for(pilot, lambda: "force target_only on 4:" in _results(app), "force results")
            assert "3 ok, 1 no-answer" in _results(app)
            assert _results(app).splitlines()[1].lstrip().startswith("no-answer") and "gone" in _results(app)
            await wait_for(pilot, lambda: [screen.last_rows[m]["mode"] for m in "abc"] == ["TARGET"] * 3, "forced")
            await pilot.press("F", "a")
            await wait_for(pilot, lambda: "force auto on 4:" in _results(app), "auto again")

            # enter: the single-server screen for the remote member; escape: back
            screen.table.move_cursor(row=2)
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, FleetScreen), "member screen")
            member = app.screen
            assert isinstance(member, MemberScreen) and member.member == "c"
            assert member.session is fleet.members["c"].session and member.snapshot.url == fleet.members["c"].url
            await wait_for(pilot, lambda: member.log_view.status().total > 0, "the remote log on screen")
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), "back to the fleet")

            await pilot.press("X")  # stop everyone and the gateway: answered once the question is up
            await wait_for(pilot, lambda: "Stop 4 member(s)" in screen_text(app), "the question")
            await pilot.press("y")
            await wait_for(pilot, lambda: "stop on 5:" in _results(app), "stop results", 60)
            assert "4 ok, 1 refused" in _results(app)
            await wait_for(pilot, lambda: all(screen.last_rows[m]["state"].plain == "stopped" for m in "ab"), "stopped", 30)
    finally:
        await fleet.act("stop")  # everything, the gateway too, whatever happened above
        await fleet.close()


class _RowsOnly:
    """The part of a Fleet the table reads: rows (fixed), names, the gateway (none)."""

    def __init__(self, rows):
        self._rows = tuple(rows)
        self.members = {r.name: None for r in rows}
        self.spec = parse_fleet({"name": "rows", "members": {"x": {"url": "http://127.0.0.1:9"}}})
        self.gateway = self.gateway_status = None

    def rows(self):
        return self._rows


async def test_sort_filter_select_keys_repaint_from_the_cached_rows():
    from textual.app import App

    rows = [
        _row("b", threshold=4, tok_s=10.0, mode="speculative"),
        _row("a", threshold=9, mode="target_only"),
        _row("c", host="gpu-7", state="no-answer", threshold=1),
    ]

    class Host(App):
        def on_mount(self):
            self.push_screen(FleetScreen(_RowsOnly(rows)))

    app = Host()
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.order == ["a", "b", "c"] and " MEMBER\u25b2 " in screen_text(app)
        await pilot.press("o", "o", "o", "o")  # name -> host -> state -> mode -> threshold
        assert screen.sort == "threshold" and screen.order == ["c", "b", "a"]
        await pilot.press("O")
        assert screen.order == ["a", "b", "c"] and " N\u25bc " in screen_text(app) and "MEMBER\u25b2" not in screen_text(app)
        await pilot.press("slash", *"!gpu", "enter")
        assert screen.order == ["a", "b"] and "2 shown (/!gpu)" in screen_text(app)
        await pilot.press("space")
        assert screen.selected == {"a"} and screen.targets() == ["a"] and "1 selected" in screen_text(app)
        await pilot.press("escape")
        assert screen.selected == set() and screen.order == ["a", "b", "c"] and screen.targets() == ["a", "b", "c"]
        assert "no-answer" in screen_text(app)


def test_gateway_worker_line_names_members_strangers_and_trouble():
    from console.fleet.screen import gateway_workers
    from server_control.fleet.gateway import GatewayStatus, GatewayWorker

    st = GatewayStatus(
        url="http://127.0.0.1:1",
        state="ready",
        reachable=True,
        workers=(GatewayWorker("http://h:1", "a", True, "ready", 3), GatewayWorker("http://h:2", None, False, "pending", None)),
    )
    line = gateway_workers(st)
    assert line.plain == "gateway workers: a ready load 3 | http://h:2 (no member) pending"
    assert [span.style for span in line.spans] == ["green", "bold red"]
    down = GatewayStatus(url="u", state="crashed", reachable=False, error="ConnectError")
    assert gateway_workers(down).plain == "gateway workers: not readable (ConnectError)"
    assert gateway_workers(None).plain == ""
