"""Issue 14, the operator's screen: each item's behaviour on the real app driven by its
Pilot over the fake session (the same behaviour against the real simulator in tmux is in
test_operator_tmux.py). Every test here failed before the change it guards."""

from __future__ import annotations

import time

from console.dialogs.confirm import ChoiceScreen
from tests.console.fakes import FakeSession
from tests.console.screen_text import answer_prompt, screen_text, settle_log, toasts, wait_for


# ---- 2. N=0 only through = with a confirmation ------------------------------------------
async def test_minus_stops_at_one_and_says_how_to_reach_zero(make_app, fake):
    fake.snap["spec"]["threshold"] = 1
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("minus")
        await pilot.pause()
        assert fake.calls == []
        said = toasts(app)
        assert "stops at 1" in said and "never disable" in said and "`=` 0" in said


async def test_zero_through_equals_asks_what_it_means(make_app, fake):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("equals_sign")
        await answer_prompt(pilot, app, "0")
        assert isinstance(app.screen, ChoiceScreen), "N=0 asks first"
        assert "never disable" in screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        assert fake.calls == []
        await pilot.press("equals_sign")
        await answer_prompt(pilot, app, "0")
        await pilot.press("y")
        await pilot.pause()
        assert fake.calls == [("set_threshold", 0)]
        assert "never disable" in screen_text(app).splitlines()[0]


# ---- 3. a dead server looks dead ----------------------------------------------------------
async def test_unreachable_server_greys_stale_data_with_its_age():
    snap = FakeSession().snap
    snap["server"].update(reachable=False, error="http://127.0.0.1:30000/server_info: connection refused")
    snap["live"]["ts"] = time.time() - 12
    app_fake = FakeSession(snap)
    from console.app import SpecConsoleApp

    app = SpecConsoleApp(app_fake)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "UNREACHABLE" in text.splitlines()[0]
        assert "last sample 12 s ago" in text or "last sample 13 s ago" in text


async def test_the_log_says_where_the_server_stopped_answering_and_no_quick_filter_hides_it(make_app, fake):
    fake.store.add_console_line(
        "\u2500\u2500 specconsole 10:00:09: the server stopped answering (connection refused) \u2500\u2500"
    )
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_log(pilot, app)
        assert "the server stopped answering" in screen_text(app)
        await pilot.press("e")  # errors only: the console's own line stays as context
        await settle_log(pilot, app)
        assert "the server stopped answering" in screen_text(app) and "Decode batch" not in screen_text(app)


# ---- 7. s on a running server ---------------------------------------------------------
async def test_start_on_a_running_server_says_it_is_running(make_app, fake):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("s")
        await pilot.pause()
        assert fake.calls == []
        assert "already running" in toasts(app)


# ---- 9. quit and restart dialogs ------------------------------------------------------------
async def test_quit_enter_leaves_running_in_the_demo_too(make_app, fake):
    app = make_app(what="simulator")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert "supervis" in screen_text(app)
        await pilot.press("enter")
        await pilot.pause()
    assert fake.closed_with is False


async def test_restart_dialog_says_what_happens_to_runtime_settings(make_app, fake):
    fake.snap["spec"]["threshold"] = 8  # changed at runtime: the profile says 5
    fake.snap["run"]["runtime"] = {"speculative_disable_batch_threshold": 8}
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("r")
        await pilot.pause()
        text = screen_text(app)
        assert "batch_threshold=8" in text and "re-applied" in text


# ---- 10. forced switches ----------------------------------------------------------------------
async def test_forced_switch_rows_are_marked(make_app, fake):
    fake.snap["switches"].append(
        {"ts": "2026-11-29T10:03:00", "mode": "speculative", "batch": None, "threshold": None, "rank": "TP0", "forced": True}
    )
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "None" not in text and "forced" in text


# ---- 13. polish -------------------------------------------------------------------------------
async def test_attached_footer_offers_no_start_stop_restart():
    snap = FakeSession().snap
    snap["attached"] = True
    from console.app import SpecConsoleApp

    app = SpecConsoleApp(FakeSession(snap))
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.pause()
        footer = screen_text(app).splitlines()[-1]
        assert " Start" not in footer and " Stop" not in footer and " Restart" not in footer


# ---- 5. flapping: the rate, the warning, one key applies the suggestion -------------------
async def test_flapping_is_said_with_a_suggestion_and_h_applies_it(make_app, fake):
    fake.snap["spec"]["switch_rate"] = {
        "per_min": 10.0,
        "count": 20,
        "window_s": 120.0,
        "flapping": True,
        "suggestion": {
            "key": "speculative_disable_hysteresis",
            "name": "hysteresis",
            "value": 2,
            "current": 1,
            "effect": "resume speculating at batch <= 3 instead of <= 4",
        },
    }
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        first = screen_text(app).splitlines()[0]
        assert "FLAPPING 10/min" in first and "H: hysteresis 1\u21922" in first
        await pilot.press("H")
        await pilot.pause()
        assert fake.calls == [("set_setting", "speculative_disable_hysteresis", 2)]


async def test_the_switch_rate_shows_without_flapping(make_app, fake):
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        first = screen_text(app).splitlines()[0]
        assert "switches 3 (1.5/min)" in first and "FLAPPING" not in first
        await pilot.press("H")
        await pilot.pause()
        assert fake.calls == [] and "not flapping" in toasts(app)


# ---- 11. modes by glyph as well as colour ------------------------------------------------
def test_target_only_bars_are_hatched_speculative_bars_solid():
    from console.widgets.live_panel import HATCH, batch_chart

    rows = [r.plain for r in batch_chart([8.0, 8.0], 5, 2, 4, modes=[0, 1])]
    bodies = "".join(r[-2:] for r in rows)
    assert "\u2588" in bodies[0::2] and HATCH not in bodies[0::2]  # speculative: solid
    assert HATCH in bodies[1::2] and "\u2588" not in bodies[1::2]  # target-only: hatched


# ---- 12. layout: a time axis, the GPU panel in one row without NVML ---------------------------
async def test_chart_has_a_time_axis_and_gpus_take_one_row_without_nvml(make_app, fake):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert any("-15s" in line and "now" in line for line in lines)
        gpu = [line for line in lines if "NVML Shared Library Not Found" in line]
        assert len(gpu) == 1 and gpu[0].lstrip().startswith("GPUs N/A")
        assert app.query_one("#gpus").outer_size.height == 1
        live, verify = app.query_one("#live").size.width, app.query_one("#verify").size.width
        assert live >= 50 and live > verify  # was 32 and 56 at 120 columns


# ---- 13. palette, theme, footer -------------------------------------------------------------
async def test_palette_has_one_quit_and_a_screenshot_into_home(make_app, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Quit" not in titles and titles.count("Screenshot") == 1
        shot = next(c for c in app.get_system_commands(app.screen) if c.title == "Screenshot")
        shot.callback()
        await wait_for(pilot, lambda: str(tmp_path) in toasts(app), "the screenshot's toast", timeout=10)
        assert list(tmp_path.glob("*.svg"))


async def test_theme_is_remembered(fake, tmp_path, monkeypatch):
    from console.app import SpecConsoleApp

    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    app = SpecConsoleApp(fake, remember_theme=True)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await pilot.pause()
    again = SpecConsoleApp(fake, remember_theme=True)
    async with again.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert again.theme == "nord"


async def test_footer_never_cuts_a_key_in_the_middle(make_app, fake):
    app = make_app()
    for size in ((80, 24), (120, 40)):
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: screen_text(pilot.app).splitlines()[-1].strip(), "the footer")  # slow under load
            await pilot.pause(0.3)  # then its fit to the width
            footer = screen_text(app).splitlines()[-1]
            left = footer.split("\u258f")[0].rstrip()
            assert left.endswith(("Start", "Stop", "Restart", "Verify", "Follow", "Filter", "Search", "Force")), footer
        app = make_app()
