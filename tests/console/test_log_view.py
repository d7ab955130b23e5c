"""Log view behaviour (follow, filter, search, quick filters, wrap, save) over a real
LogStore fed deterministic lines through a fake session (widget tests only)."""

from __future__ import annotations

from textual.widgets import Input, Label

from console.dialogs.prompt import PromptScreen
from tests.console.screen_text import screen_text


def lines(n, start=0, word="tick"):
    return [f"[2026-11-29 10:00:00 TP{i % 2}] {word} line {i}" for i in range(start, start + n)]


async def settle(pilot, app):
    await pilot.pause(0.12)  # one flush (50 ms) and a repaint
    app.log_view.flush()
    await pilot.pause()


def shown(app) -> str:
    return "\n".join(r.raw for r in app.log_view.shown_records())


async def prompt(pilot, app, text):
    assert isinstance(app.screen, PromptScreen)
    app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await pilot.pause()


async def test_follow_pause_count_and_resume(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        fake.add_lines(lines(300))
        await settle(pilot, app)
        view = app.log_view
        assert view.follow and view.scroll_y == view.max_scroll_y
        assert "tick line 299" in screen_text(app)
        await pilot.press("up", "up")
        assert not view.follow
        y = view.scroll_y
        fake.add_lines(lines(40, 300))
        await settle(pilot, app)
        assert view.scroll_y == y, "a paused view must not move"
        assert "tick line 339" not in screen_text(app)
        assert "PAUSED" in screen_text(app) and "40 new lines" in screen_text(app)
        await pilot.press("end")
        await pilot.pause()
        assert view.follow and view.new_while_paused == 0
        assert "tick line 339" in screen_text(app) and "FOLLOW" in screen_text(app)
        await pilot.press("f")
        assert not view.follow
        await pilot.press("f")
        assert view.follow and view.scroll_y == view.max_scroll_y
        # scrolling back down to the bottom resumes following
        await pilot.press("pageup")
        assert not view.follow
        await pilot.press("pagedown", "pagedown", "pagedown")
        await pilot.pause()
        assert view.follow


async def test_filter_invert_and_bad_regex(fake, make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("ampersand")
        await prompt(pilot, app, "switched to")
        text = screen_text(app)
        assert "switched to target-only" in text and "fired up" not in text
        assert "filter: /switched to/" in text
        await pilot.press("ampersand")
        await prompt(pilot, app, "!Decode batch")
        assert "Decode batch" not in shown(app) and "fired up" in shown(app)
        assert "NOT /Decode batch/" in screen_text(app)
        await pilot.press("ampersand")
        await prompt(pilot, app, "(unclosed")
        assert isinstance(app.screen, PromptScreen), "a bad regex keeps the prompt open"
        assert "bad regex" in str(app.screen.query_one("#error", Label).render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.log_view.filter.prompt_text == "!Decode batch"  # old filter kept
        await pilot.press("escape")  # clears everything
        await pilot.pause()
        assert "Decode batch" in shown(app) and "filter:" not in screen_text(app)


async def test_search_highlights_and_jumps_keeping_context(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        fake.add_lines(
            lines(100, word="alpha")
            + ["[2026-11-29 10:00:01 TP0] NEEDLE one"]
            + lines(100, 100, word="beta")
            + ["[2026-11-29 10:00:02 TP1] NEEDLE two"]
            + lines(100, 200, word="gamma")
        )
        await settle(pilot, app)
        view = app.log_view
        view.jump_home()
        await pilot.pause()
        await pilot.press("slash")
        await prompt(pilot, app, "NEEDLE")
        assert view.search_hits == 2
        first = view.current_match_row()
        text = screen_text(app)
        assert "NEEDLE one" in text and "alpha line 99" in text, "the match shows with context"
        assert not view.follow
        assert view.shown_records()  # filter untouched: everything still shown
        assert len(view.shown_records()) == len(fake.store.records())
        await pilot.press("n")
        second = view.current_match_row()
        assert second > first and "NEEDLE two" in screen_text(app)
        await pilot.press("n")  # wraps around
        assert view.current_match_row() == first
        await pilot.press("N")
        assert view.current_match_row() == second
        await pilot.press("slash")
        await prompt(pilot, app, "[bad")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("escape")


async def test_quick_filters_wrap_and_save(fake, make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(80, 30)) as pilot:
        fake.add_lines(["[2026-11-29 10:00:09 TP1] " + "x" * 300])
        await settle(pilot, app)
        view = app.log_view
        await pilot.press("e")
        kinds = {r.kind for r in view.shown_records()}
        assert kinds == {"traceback"} or kinds <= {"error", "traceback"} and kinds
        await pilot.press("e", "d")
        assert not {r.kind for r in view.shown_records()} & {"decode", "prefill"}
        await pilot.press("d", "R")
        assert view.filter.rank == "TP0"
        assert all(r.rank == "TP0" for r in view.shown_records())
        await pilot.press("R")
        assert view.filter.rank == "TP1"
        await pilot.press("R")
        assert view.filter.rank is None
        rows = view.row_count
        await pilot.press("w")
        await pilot.pause()
        assert view.wrap and view.row_count > rows
        assert "x" * 70 in screen_text(app)
        await pilot.press("ampersand")
        await prompt(pilot, app, "Dynamic")
        target = tmp_path / "shown.log"
        await pilot.press("ctrl+s")
        await prompt(pilot, app, str(target))
        saved = target.read_text().splitlines()
        assert saved and all("Dynamic" in line for line in saved)
        assert len(saved) == 3
        await pilot.press("ctrl+s")
        await prompt(pilot, app, str(tmp_path / "no" / "such" / "dir.log"))
        assert isinstance(app.screen, PromptScreen), "an unwritable path is an error, not a crash"
        await pilot.press("escape")


async def test_ansi_stripped_long_lines_capped_and_highlighted(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        fake.add_lines(["[2026-11-29 10:00:09] \x1b[31mred words\x1b[0m here", "[2026-11-29 10:00:10] " + "y" * 5000])
        await settle(pilot, app)
        text = screen_text(app)
        assert "red words here" in text and "\x1b" not in text
        view = app.log_view
        assert view.rows.end[-1] - view.rows.start[-1] < 2100
        assert fake.store.truncated == 1 and "1 long line cut for display" in text
        # the init line gets its own strong style, distinct from switch/warning lines
        from console.widgets.log.format import KIND_STYLES, style_for

        init = next(r for r in view.shown_records() if r.kind == "spec_init")
        assert style_for(init) == KIND_STYLES["spec_init"]
        assert len({str(KIND_STYLES[k]) for k in ("spec_init", "spec_switch", "error", "warning")}) == 4


async def test_not_active_line_is_white_on_red_on_screen(fake, make_app):
    """The patch's NOT active line is classified an error; its own loudest style must still
    win over the plain error style (it never applied while only "other" lines were checked)."""
    from console.widgets.log.format import KIND_STYLES, NOT_ACTIVE_STYLE, style_for

    line = "[2026-11-29 10:00:11 TP0] Dynamic speculation disable NOT active: worker class EAGLEWorker has no hook"
    app = make_app()
    async with app.run_test(size=(120, 24)) as pilot:
        fake.add_lines([line, "[2026-11-29 10:00:12 TP0] ERROR: something else broke"])
        await settle(pilot, app)
        shown = {r.text: r for r in app.log_view.shown_records()}
        not_active = next(r for t, r in shown.items() if t.startswith("Dynamic speculation disable NOT active"))
        other_error = next(r for t, r in shown.items() if "something else broke" in t)
        assert not_active.kind == other_error.kind == "error"
        assert style_for(not_active) == NOT_ACTIVE_STYLE != KIND_STYLES["error"]
        assert style_for(other_error) == KIND_STYLES["error"]
        row = app.log_view.rows.seq.index(not_active.seq) - int(app.log_view.scroll_y)
        segments = list(app.log_view.render_line(row))
        assert any(seg.style and seg.style.bgcolor and seg.style.bgcolor.name == "red" for seg in segments)


async def test_burst_is_flushed_in_batches(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(pilot, app)
        view = app.log_view
        base = view.row_count
        flushes = []
        real_flush = view.flush
        view.flush = lambda: flushes.append(real_flush())
        for i in range(50):  # 50 notifications in one tick -> one batched flush
            fake.add_lines(lines(100, i * 100))
        for _ in range(40):  # rows reach the view at most every REDRAW_S after the last flush
            await pilot.pause(0.05)
            if view.row_count == base + 5000:
                break
        assert view.row_count == base + 5000
        assert 1 <= len(flushes) <= 2 and sum(flushes) == 5000


def test_the_search_and_filter_come_before_the_counters_in_the_status_line():
    """Under load (a 4-digit count of new lines while paused) the search status was cut off
    the end of the 120-column line: the tmux test saw the match marked but never its status."""
    from console.messages import LogViewStatus
    from console.widgets.log.pane import status_text

    st = LogViewStatus(
        follow=False, new=1879, shown=1920, total=2009, dropped=0, truncated=0, filter="TP0",
        search="speculation disable", hits=3, wrap=False, position=(1, 3), polls_hidden=67, folded=22,
    )  # fmt: skip
    text = status_text(st).plain
    assert text.index("search: /speculation disable/ 1/3") < text.index("1879 new lines")
    assert text.index("filter: TP0") < text.index("1920 of 2009 shown")
    assert text.index("1/3") < 60
