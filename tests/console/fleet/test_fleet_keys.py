"""Fleet screen basics (issue 23 item 6): `?` shows the fleet's own keys (it did nothing),
`j`/`k` move the cursor (they did not move), `g`/`G` jump. Pilot over fixed rows."""

from __future__ import annotations

from textual.app import App

from console.fleet.help import FleetHelpScreen
from console.fleet.screen import FleetScreen
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


class _RowsOnly:
    """The part of a Fleet the screen reads: fixed rows, names, no gateway."""

    def __init__(self, rows):
        self._rows = tuple(rows)
        self.members = {r.name: None for r in rows}
        self.spec = parse_fleet({"name": "rows", "members": {"x": {"url": "http://127.0.0.1:9"}}})
        self.gateway = self.gateway_status = None

    def rows(self):
        return self._rows


async def test_help_and_j_k_on_the_fleet_screen():
    rows = [_row(n, threshold=4) for n in ("a", "b", "c", "d")]

    class Host(App):
        def on_mount(self):
            self.push_screen(FleetScreen(_RowsOnly(rows)))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.table.cursor_row == 0
        await pilot.press("j", "j")
        assert screen.cursor_name() == "c"
        await pilot.press("k")
        assert screen.cursor_name() == "b"
        await pilot.press("G")
        assert screen.cursor_name() == "d"
        await pilot.press("g")
        assert screen.cursor_name() == "a"
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, FleetHelpScreen)
        text = screen_text(app)
        assert "Set threshold N" in text and "Force a mode" in text and "j / down" in text
        assert "Fold" not in text  # not the single-server screen's keys
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


def test_one_verify_glyph_set_and_stale_rows_dimmed():
    """Issue 23 item 6: VERIFY read `++.` on the fleet screen and ✓✓… elsewhere; a crashed
    or starting member kept live-looking numbers."""
    from console.fleet.rows import cells

    live = cells(_row("a", marks="++.", batch=7, tok_s=512.0), False)
    assert live["marks"].plain == "\u2713\u2713\u2026" and live["batch"] == "7"
    dead = cells(_row("b", state="crashed", marks="+x.", batch=7, tok_s=512.0), False)
    assert dead["marks"].plain == "\u2713\u2717\u2026"
    assert dead["batch"].style == "dim" and dead["tok_s"].style == "dim"


async def test_the_fleet_keys_are_in_the_one_table_and_a_user_keymap_rebinds_them():
    """Issue 36 item 5: the fleet screen had its own BINDINGS, help and palette, which the
    user keymap (console/prefs.py, binding ids) could not rebind."""
    from console.keys import BINDING_IDS

    assert {"fleet.sort", "fleet.set_n", "fleet.step_n_up", "fleet.quit_fleet"} <= BINDING_IDS
    rows = [_row(n, threshold=4) for n in ("a", "b")]

    class Host(App):
        def on_mount(self):
            self.set_keymap({"fleet.sort": "s"})  # as the app does with the preferences' keymap
            self.push_screen(FleetScreen(_RowsOnly(rows)))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        first = screen.sort
        await pilot.press("s")
        assert screen.sort != first  # the rebound key sorts
        after = screen.sort
        await pilot.press("o")
        assert screen.sort == after  # the default key no longer does
