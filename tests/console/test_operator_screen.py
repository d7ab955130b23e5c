"""Issue 14, the operator's screen: each item's behaviour on the real app driven by its
Pilot over the fake session (the same behaviour against the real simulator in tmux is in
test_operator_tmux.py). Every test here failed before the change it guards."""

from __future__ import annotations

from textual.widgets import Input

from tests.console.screen_text import answer_prompt, screen_text, settle_log

POLLS = ['INFO:     127.0.0.1:45580 - "GET /server_info HTTP/1.1" 200 OK' for _ in range(5)] + [
    'INFO:     127.0.0.1:45580 - "GET /v1/loads?include=core,memory,spec HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:45566 - "GET /health HTTP/1.1" 200 OK',
]
NEWS = [
    'INFO:     127.0.0.1:45566 - "GET /health HTTP/1.1" 503 Service Unavailable',
    'INFO:     127.0.0.1:45678 - "POST /generate HTTP/1.1" 200 OK',
]


# ---- 1. polling access lines hidden, counted, one key shows them -----------------------
async def test_polling_lines_hidden_by_default_counted_and_shown_by_a_key(make_app, fake):
    fake.add_lines(POLLS + NEWS)
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)
        text = screen_text(app)
        assert "GET /server_info" not in text and "GET /v1/loads" not in text
        assert "503 Service Unavailable" in text and "POST /generate" in text
        assert "7 polls hidden" in text
        await pilot.press("a")
        await settle_log(pilot, app)
        text = screen_text(app)
        assert "GET /server_info" in text and "polls shown" in text


# ---- 4. switches are not errors; every TP rank's copy folds into one row ---------------------
async def test_switch_lines_fold_across_tp_ranks_and_t_unfolds(make_app, fake):
    fake.add_lines(
        [
            f"[2026-11-29 10:00:30 TP{i}] Dynamic speculation: switched to speculative (decode batch 3 <= 4, threshold 5)"
            for i in range(4)
        ]
    )
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)
        text = screen_text(app)
        assert "TP0-3] Dynamic speculation: switched to speculative" in text and "4 folded (t)" in text  # + init TP0,1
        assert "TP2] Dynamic speculation: switched to speculative" not in text
        await pilot.press("t")
        await settle_log(pilot, app)
        text = screen_text(app)
        assert all(f"TP{i}] Dynamic speculation: switched to speculative" in text for i in range(4))


def test_a_switch_is_not_styled_like_an_error_and_not_active_is_loudest():
    from console.widgets.log.format import KIND_STYLES, NOT_ACTIVE_STYLE
    from server_control.logs import parse_text

    switch, error, not_active = parse_text(
        "[2026-11-29 10:00:06 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)\n"
        "[2026-11-29 10:00:07 TP0] ERROR: CUDA out of memory\n"
        "[2026-11-29 10:00:08 TP0] Dynamic speculation disable NOT active: no draft worker\n"
    )
    from console.widgets.log.format import style_for

    assert style_for(switch).color != style_for(error).color and not style_for(switch).color.name.endswith("red")
    assert style_for(not_active) == NOT_ACTIVE_STYLE and NOT_ACTIVE_STYLE.bgcolor is not None
    assert KIND_STYLES["error"].bold and "red" in KIND_STYLES["error"].color.name


# ---- 6. filter and search -----------------------------------------------------------------
async def test_reopened_inverted_filter_keeps_its_inversion(make_app, fake):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)
        await pilot.press("ampersand")
        await answer_prompt(pilot, app, "!Decode")
        await pilot.press("ampersand")
        assert app.screen.query_one(Input).value == "!Decode"
        await pilot.press("enter")
        await pilot.pause()
        assert "NOT /Decode/" in screen_text(app)


async def test_search_starts_at_the_nearest_match_and_shows_its_position(make_app, fake):
    fake.add_lines([f"[2026-11-29 10:00:00 TP0] {'NEEDLE' if i % 30 == 0 else 'hay'} {i}" for i in range(300)])
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)  # following: the view is at the end
        await pilot.press("slash")
        await answer_prompt(pilot, app, "NEEDLE")
        text = screen_text(app)
        assert "NEEDLE 270" in text, "the nearest match to the view, not the first of the log"
        assert "10/10" in text
        await pilot.press("N")
        await pilot.pause()
        assert "9/10" in screen_text(app)


async def test_counters_count_records_with_wrap_and_tracebacks(make_app, fake):
    fake.add_lines(["[2026-11-29 10:00:09 TP1] " + "x" * 500])
    app = make_app()
    async with app.run_test(size=(80, 30)) as pilot:
        await settle_log(pilot, app)
        total = fake.store.total
        assert f"{total} shown" in screen_text(app), "a traceback is one record, shown once"
        await pilot.press("w")
        await settle_log(pilot, app)
        assert f"{total} shown" in screen_text(app), "wrapped rows are not records"


# ---- 7. less / k9s habits ------------------------------------------------------------------
async def test_less_keys_move_and_k_filters_nothing(make_app, fake):
    fake.add_lines([f"[2026-11-29 10:00:00 TP{i % 2}] line {i}" for i in range(400)])
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)
        view = app.log_view
        bottom = view.scroll_y
        await pilot.press("k")
        assert view.scroll_y == bottom - 1 and not view.filter.active
        await pilot.press("g")
        assert view.scroll_y == 0
        await pilot.press("j")
        assert view.scroll_y == 1
        await pilot.press("space")
        assert view.scroll_y > 10
        y = view.scroll_y
        await pilot.press("ctrl+u")
        assert view.scroll_y < y
        await pilot.press("ctrl+d")
        assert view.scroll_y == y
        await pilot.press("G")
        assert view.follow and view.scroll_y == view.max_scroll_y


# ---- 13. ctrl+s: a full path in the home directory, never a silent overwrite -----------------
async def test_save_offers_a_path_in_home_and_asks_before_overwriting(make_app, fake, tmp_path, monkeypatch):
    from console.dialogs.confirm import ChoiceScreen

    monkeypatch.setenv("HOME", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)
        await pilot.press("ctrl+s")
        offered = app.screen.query_one(Input).value
        assert offered.startswith(f"{tmp_path}/specconsole-demo-") and offered.endswith(".log")
        target = tmp_path / "kept.log"
        target.write_text("the operator's own notes\n")
        await answer_prompt(pilot, app, str(target))
        assert isinstance(app.screen, ChoiceScreen) and "exists" in screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        assert target.read_text() == "the operator's own notes\n"
        await pilot.press("ctrl+s")
        await answer_prompt(pilot, app, str(target))
        await pilot.press("y")
        await pilot.pause()
        assert "Dynamic speculation disable enabled" in target.read_text()
