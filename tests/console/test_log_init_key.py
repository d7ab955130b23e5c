"""`I` in the log view: each rank's init line (`Dynamic speculation disable enabled:
threshold=N`) in turn, marked and numbered as `:` marks a line; with none in the log it
says what that means and where to look (issue 35 item 3). Real app under Pilot, a real
LogStore fed through the fake session."""

from __future__ import annotations

from console.app import SpecConsoleApp
from console.widgets.log.rows import SUB_BITS
from server_control.control.init_lines import NOT_IN_SERVER
from tests.console.fakes import FakeSession
from tests.console.screen_text import toasts


async def settle(pilot, app):
    await pilot.pause(0.12)
    app.log_view.flush()
    await pilot.pause()


def marked_text(app) -> str:
    view = app.log_view
    assert view.mark is not None, "no line marked"
    rec = view.store.get(view.mark >> SUB_BITS)
    return rec.raw if rec is not None else ""


async def test_i_goes_to_each_ranks_init_line_in_turn():
    app = SpecConsoleApp(FakeSession())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("I")
        assert "TP0] Dynamic speculation disable enabled" in marked_text(app)
        assert app.log_view.numbers and "init line 1 of 2: TP0 log line 2" in toasts(app)
        await pilot.press("I")  # TP1's copy is folded under TP0's (`t`): said, the nearest marked
        said = toasts(app)
        assert "init line 2 of 2: TP1 log line 3" in said and "log line 3 is hidden" in said, said
        await pilot.press("t", "I")  # unfolded; round again: TP0, then TP1 itself
        assert "TP0] Dynamic speculation disable enabled" in marked_text(app)
        await pilot.press("I")
        assert "TP1] Dynamic speculation disable enabled" in marked_text(app)


async def test_i_without_an_init_line_says_what_that_means():
    app = SpecConsoleApp(FakeSession(lines=["[2026-11-29 10:00:02] The server is fired up and ready to roll!"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("I")
        assert app.log_view.mark is None
        said = toasts(app)
        assert NOT_IN_SERVER in said and "verify --explain" in said, said
