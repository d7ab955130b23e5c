"""Fleet screen, issue 23 item 6: `ctrl+p` lists the fleet's actions (it listed the single
server's), the aggregate line (total tok/s of live members, members per mode, who is down,
the gateway's workers), a tok/s trend per row, the sorted column's arrow, and a header that
fits at 120 and 80 columns. Pilot over fixed rows."""

from __future__ import annotations

import pytest
from textual.app import App

from console.dialogs.prompt import PromptScreen
from console.fleet.screen import FleetScreen
from server_control.fleet.gateway import GatewayStatus, GatewayWorker
from server_control.fleet.member import MemberRow
from server_control.fleet.spec import parse_fleet
from tests.console.screen_text import screen_text


def _row(name, **kw):
    return MemberRow(
        name=name,
        kind="local",
        host=kw.pop("host", "local"),
        state=kw.pop("state", "ready"),
        reachable=kw.pop("reachable", True),
        **kw,
    )


class _Rows:
    def __init__(self, rows, gateway=None):
        self.set(rows)
        self.members = {r.name: None for r in rows}
        self.spec = parse_fleet({"name": "production-eu-west", "members": {"x": {"url": "http://127.0.0.1:9"}}})
        self.gateway = None
        self.gateway_status = gateway

    def set(self, rows):
        self._rows = tuple(rows)

    def rows(self):
        return self._rows


def _host(fleet):
    class Host(App):  # as FleetApp (ConsoleApp): the single server's actions are its ServerScreen's
        def on_mount(self):
            self.push_screen(FleetScreen(fleet))

    return Host()


ROWS = [
    _row("a", tok_s=100.0, mode="speculative", threshold=4, batch=3),
    _row("b", tok_s=54.5, mode="target_only", threshold=4, batch=9),
    _row("c", state="crashed", tok_s=999.0, mode="speculative", reachable=False),
]
GATEWAY = GatewayStatus(
    url="http://127.0.0.1:30000",
    state="ready",
    reachable=True,
    workers=(
        GatewayWorker("http://127.0.0.1:1", "a", True, "ready", 0),
        GatewayWorker("http://127.0.0.1:2", "b", True, "ready", 1),
    ),
)


async def test_palette_lists_the_fleet_actions():
    app = _host(_Rows(ROWS))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause(0.5)
        text = screen_text(app)
        assert "Fleet: Set threshold N" in text, text
        assert "Toggle following" not in text and "Raise the speculation threshold" not in text
        # the list outgrows the palette's height: the later actions are found by searching
        await pilot.press(*"launch")
        await pilot.pause(0.5)
        assert "Fleet: Launch" in screen_text(app), screen_text(app)
        await pilot.press(*["backspace"] * len("launch"))
        await pilot.press(*"filter rows")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, PromptScreen), "the fleet's filter prompt"


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_aggregate_trend_and_header(size, monkeypatch):
    # the screen's own tick every 10 ms (1 s in use): a tick between the three readings below
    # and the checks adds a fourth (it failed so on a loaded machine, where a pause outlasts
    # 1 s), so the test holds the ticker while it feeds the readings itself
    monkeypatch.setattr("console.fleet.screen.REFRESH_S", 0.01)
    fleet = _Rows(ROWS, GATEWAY)
    app = _host(fleet)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.ticker.pause()
        text = screen_text(app)
        line = next(x for x in text.splitlines() if "tok/s" in x and "fleet" in x)
        assert "fleet 154.5 tok/s" in line, "the crashed member's numbers are not live: not counted"
        assert "SPEC 1" in line and "TARGET 1" in line
        assert "live 2/3" in line and "(down: c)" in line
        header = text.splitlines()[0]
        assert "production-eu-west: 3 members" in header and "gateway 127.0.0.1:30000 ready" in header
        assert "\u2026" not in header, f"the header is cut at {size[0]} columns"
        for tok in (20.0, 60.0, 100.0):
            fleet.set([_row("a", tok_s=tok, mode="speculative"), *ROWS[1:]])
            screen.refresh_rows()
        await pilot.pause()
        assert screen.trends.line("a").endswith("\u2582\u2585\u2588")
        assert screen.last_rows["a"]["trend"].endswith("\u2582\u2585\u2588")
        assert screen.trends.line("c").strip() == "", "no trend from numbers that are not live"
        if size[0] >= 120:
            assert "\u2582\u2585\u2588" in screen_text(app)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_gateways_own_traffic_or_why_not(size):
    from dataclasses import replace  # noqa: PLC0415

    from server_control.fleet.gateway_metrics import GatewayRates  # noqa: PLC0415

    busy = replace(GATEWAY, traffic=GatewayRates(req_s=4.25, err_min=0.0, p50_ms=41.2, window_s=60.0))
    app = _host(_Rows(ROWS, busy))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "gateway 2/2 workers healthy \u00b7 4.2 req/s \u00b7 0 err/min \u00b7 p50 41 ms (60 s)" in text, text
        assert "live 2/3" in text, "the fleet's own part keeps its line"
    gone = replace(GATEWAY, traffic=GatewayRates(error="http://127.0.0.1:9/metrics: ConnectError"))
    app = _host(_Rows(ROWS, gone))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert "metrics unavailable (http://127.0.0.1:9" in screen_text(app)


async def test_a_member_down_is_down_in_the_gateway_line_whatever_smg_says():
    gateway = GatewayStatus(
        url="http://127.0.0.1:30000",
        state="ready",
        reachable=True,
        workers=(*GATEWAY.workers, GatewayWorker("http://127.0.0.1:3", "c", True, "ready", 0)),
    )
    app = _host(_Rows(ROWS, gateway))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        line = next(x for x in screen_text(app).splitlines() if x.lstrip().startswith("gateway workers"))
        assert "c DOWN (smg: ready)" in line and "a ready" in line, line


async def test_l_shows_the_gateways_own_log_followed(tmp_path):
    from console.fleet.gateway_log import GatewayLogScreen  # noqa: PLC0415

    log = tmp_path / "smg.log"
    log.write_text("2026-12-01T10:00:00Z INFO smg: starting router\n2026-12-01T10:00:01Z WARN worker added\n")
    gateway = GatewayStatus(
        url="http://127.0.0.1:30000", state="ready", reachable=True, workers=GATEWAY.workers, log_path=str(log)
    )
    app = _host(_Rows(ROWS, gateway))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        fleet_screen = app.screen
        await pilot.press("l")
        await pilot.pause(0.8)
        assert isinstance(app.screen, GatewayLogScreen)
        assert "starting router" in screen_text(app) and "worker added" in screen_text(app)
        with log.open("a") as fh:
            fh.write("2026-12-01T10:00:02Z ERROR worker http://127.0.0.1:2 failed health check\n")
        for _ in range(30):
            await pilot.pause(0.2)
            if "failed health check" in screen_text(app):
                break
        assert "failed health check" in screen_text(app), "followed while open"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is fleet_screen


async def test_l_without_a_gateway_log_says_so():
    app = _host(_Rows(ROWS, None))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert any("no gateway log" in n.message for n in app._notifications)


async def test_new_figures_repaint_the_lines_without_re_laying_the_screen_out():
    """A second's new tok/s changes the aggregate line's text, not its height: the line is
    repainted, the screen is not laid out again (a layout pass every second, on every line);
    the gateway coming or going (one line more or less) does lay it out."""
    from textual.widgets import Static  # noqa: PLC0415

    fleet = _Rows(ROWS)
    app = _host(fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        layouts: list[str] = []
        for wid in ("#fleet-aggregate", "#fleet-header", "#fleet-gateway"):
            static = screen.query_one(wid, Static)

            def counted(*a, _orig=static.refresh, _wid=wid, **kw):
                if kw.get("layout"):
                    layouts.append(_wid)
                return _orig(*a, **kw)

            static.refresh = counted
        for tok in (20.0, 60.0, 90.0):
            fleet.set([_row("a", tok_s=tok, mode="speculative"), *ROWS[1:]])
            screen.refresh_rows()
            await pilot.pause()
            assert f"fleet {tok + 54.5:.1f} tok/s" in screen_text(app)  # repainted with the new figure
        assert layouts == [], layouts
        fleet.gateway_status = GATEWAY  # the aggregate's second line (the gateway's part) appears
        screen.refresh_rows()
        await pilot.pause()
        assert "#fleet-aggregate" in layouts and "gateway 2/2 workers healthy" in screen_text(app)
