"""The log view's line numbers, go-to-line (`:`, "log line 118" as verification cites it),
yank (`y`), and marks that stay readable: the current match on the init line (black on
green) in colour and under NO_COLOR (issue 23 item 8). Real app under Pilot, a real
LogStore fed through the fake session."""

from __future__ import annotations

from rich.color import Color
from textual.filter import NoColor
from textual.widgets import Input

from tests.console.screen_text import screen_text, toasts


def lines(n, word="tick"):
    return [f"[2026-11-29 10:00:00] {word} line {i}" for i in range(n)]


async def settle(pilot, app):
    await pilot.pause(0.12)
    app.log_view.flush()
    await pilot.pause()


async def answer(pilot, app, text):
    app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await pilot.pause()


def row_on_screen(app, needle):
    view = app.log_view
    for y in range(view.scrollable_content_region.height):
        strip = view.render_line(y)
        if needle in "".join(seg.text for seg in strip):
            return strip
    return None


async def test_goto_line_marks_it_and_y_copies_it(fake, make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        # a new run's log: its line numbers start again at 1 (the sample lines hold 1..9 too)
        fake.add_lines(lines(400))
        await settle(pilot, app)
        view = app.log_view
        assert "  118 " not in screen_text(app), "numbers are off until asked for"
        await pilot.press("colon")
        await answer(pilot, app, "log line 118")
        assert view.numbers and not view.follow
        strip = row_on_screen(app, "tick line 117")
        assert strip is not None, screen_text(app)
        text = "".join(seg.text for seg in strip)
        assert text.lstrip().startswith("118\u25b6 "), text
        await pilot.press("y")
        assert app.clipboard == "[2026-11-29 10:00:00] tick line 117"
        assert "copied the current line" in toasts(app)
        # a line the log does not hold: said, nothing moves
        await pilot.press("colon")
        await answer(pilot, app, "99999")
        assert "has no line 99999" in toasts(app)
        await pilot.press("colon")
        await answer(pilot, app, "abc")
        assert "line number" in screen_text(app), "a bad answer keeps the prompt open with the reason"
        await pilot.press("escape")
        await pilot.press("escape")  # esc clears the mark
        assert view.mark is None
        await pilot.press("y")  # no current line: the screen is copied
        assert app.clipboard.count("\n") >= 15 and "tick line" in app.clipboard  # the visible lines, not one
        await pilot.press("number_sign")
        assert not view.numbers


def contrast(fg: Color, bg: Color) -> float:
    def lum(c: Color) -> float:
        def ch(byte: int) -> float:
            v = byte / 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        t = c.get_truecolor()
        return 0.2126 * ch(t.red) + 0.7152 * ch(t.green) + 0.0722 * ch(t.blue)

    a, b = sorted((lum(fg), lum(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


async def current_init_row(pilot, app):
    await settle(pilot, app)
    await pilot.press("slash")
    await answer(pilot, app, "speculation disable")
    strip = row_on_screen(app, "Dynamic speculation disable enabled")
    assert strip is not None and app.log_view.search.current is not None
    return strip


async def test_current_match_on_the_init_line_is_readable(fake, make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        strip = await current_init_row(pilot, app)
        worst = min(
            contrast(seg.style.color, seg.style.bgcolor)
            for seg in strip
            if seg.text.strip() and seg.style and seg.style.color and seg.style.bgcolor
        )
        assert worst >= 4.5, f"a part of the current init line has contrast {worst:.2f}"


async def test_current_match_is_marked_under_no_color(fake, make_app, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.no_color
        strip = await current_init_row(pilot, app)
        segments = NoColor().apply(list(strip), None)  # what Textual sends under NO_COLOR
        hit = [s for s in segments if "speculation disable" in s.text]
        rest = [s for s in segments if s.text.strip() and "speculation disable" not in s.text]
        assert hit and all(s.style.reverse for s in hit), "the current match must stand out without colour"
        assert rest and not any(s.style.reverse for s in rest)


async def test_a_jump_holds_while_the_log_is_shorter_than_the_screen(fake, make_app):
    """CI's failure: `:` 1 (or a search) while the whole log fits the screen kept following,
    so the next lines pushed the marked line away. A jump pauses following wherever it lands."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        view = app.log_view
        assert len(view.rows) < view.scrollable_content_region.height, "the sample log fits the screen"
        await pilot.press("colon")
        await answer(pilot, app, "1")
        assert not view.follow
        fake.add_lines(lines(400))
        await settle(pilot, app)
        assert not view.follow and view.new_while_paused >= 400
        strip = row_on_screen(app, "\u25b6")
        assert strip is not None and "".join(s.text for s in strip).lstrip().startswith("1\u25b6"), screen_text(app)
        # a search while following the short log: its match stays on screen too
        await pilot.press("escape", "end")
        await settle(pilot, app)
        fake.add_lines(lines(3, "late"))
        await settle(pilot, app)
        await pilot.press("slash")
        await answer(pilot, app, "late line 1")
        assert not view.follow
        fake.add_lines(lines(400, "later"))
        await settle(pilot, app)
        assert row_on_screen(app, "late line 1") is not None, screen_text(app)
        # from the top, a match in the last screenful: the jump lands at the very end, and
        # following must stay paused (Textual's own anchor would re-engage there and follow)
        await pilot.press("escape", "home")
        fake.add_lines(lines(3, "last"))
        await settle(pilot, app)
        assert not view.follow and view.scroll_y == 0
        await pilot.press("slash")
        await answer(pilot, app, "last line 2")
        assert not view.follow and view.scroll_y == view.max_scroll_y
        fake.add_lines(lines(400, "after"))
        await settle(pilot, app)
        assert not view.follow and row_on_screen(app, "last line 2") is not None, screen_text(app)
