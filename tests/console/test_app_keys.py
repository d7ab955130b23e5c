"""Keys, prompts, confirmations, help, palette and layout, over a fixed fake snapshot
(the documented Session API); the same keys against the real server are in
test_integration.py."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console
from textual.widgets import Input, Label

from console.dialogs.confirm import ChoiceScreen
from console.dialogs.prompt import PromptScreen
from console.keys import ACTIONS, PALETTE_EXCLUDE, SERVER_OWNERS, actions_of, key_text
from console.palette import ConsoleCommands
from console.screens.help import HelpScreen, help_table
from server_control.model.operation import OperationResult
from server_control.model.snapshot import SettingChange, Switch
from tests.console.screen_text import prompt_input, screen_text


async def test_threshold_keys_step_and_read_back(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("plus")
        await pilot.pause()
        assert fake.calls[-1] == ("set_threshold", 6)
        assert "N=6 applied" in screen_text(app)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        await pilot.press("minus", "left_square_bracket", "minus")
        await pilot.pause()
        assert [c[1] for c in fake.calls] == [6, 7, 6, 5, 4]
        assert "N=4 applied" in screen_text(app)


async def test_exact_threshold_prompt_validates(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("equals_sign")
        assert isinstance(app.screen, PromptScreen)
        for bad, reason in (("abc", "must be an integer"), ("-3", "must be >= 0"), ("99999", "absurd")):
            (await prompt_input(pilot, app)).value = bad
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, PromptScreen)
            assert reason in str(app.screen.query_one("#error", Label).render())
        assert fake.calls == []
        app.screen.query_one(Input).value = "12"
        await pilot.press("enter")
        await pilot.pause()
        assert fake.calls == [("set_threshold", 12)]
        assert "N=12 applied" in screen_text(app)


async def test_refused_change_is_shown(fake, make_app):
    async def refuse(n):
        fake.snap["last_change"] = {"requested": n, "state": "refused", "detail": "server said no", "ranks": [False]}
        return OperationResult.of_change("threshold", SettingChange.from_json(fake.snap["last_change"]))

    fake.set_threshold = refuse
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("plus")
        await pilot.pause(0.1)
        assert "refused: server said no" in screen_text(app)


async def test_pending_shows_until_read_back(fake, make_app):
    fake.snap["last_change"] = {"requested": 8, "state": "pending", "detail": "", "ranks": None}
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "N=5 \u2192 8 pending" in screen_text(app)
        await pilot.press("plus")  # steps from the pending value, not the old one
        await pilot.pause()
        assert fake.calls == [("set_threshold", 9)]


async def test_force_cycles(fake, make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("F")
        await pilot.pause()
        await pilot.press("F")
        await pilot.pause()
        await pilot.press("F")
        await pilot.pause()
        assert [c for c in fake.calls] == [("set_force", "speculative"), ("set_force", "target_only"), ("set_force", "auto")]


async def test_stop_and_restart_confirm_and_modal_blocks_keys(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("x")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("s", "plus")  # app keys do nothing under a modal
        await pilot.press("n")
        await pilot.pause()
        assert fake.calls == []
        await pilot.press("x")
        await pilot.press("y")
        await pilot.pause()
        await pilot.press("r")
        await pilot.press("enter")  # default answer is No
        await pilot.pause()
        await pilot.press("r", "y", "s", "v")  # s: the fake's server is running, nothing to launch
        await pilot.pause()
        assert fake.calls == [("stop",), ("restart",), ("verify",)]


async def test_quit_defaults_to_leaving_the_server_running(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("c")  # cancel stays
        await pilot.pause()
        assert not isinstance(app.screen, ChoiceScreen) and fake.closed_with is None
        await pilot.press("q", "enter")
        await pilot.pause()
    assert fake.closed_with is False
    assert "left running: pid 4242" in app.farewell


async def test_demo_quit_stops_with_s(fake, make_app):
    app = make_app(what="simulator")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q", "s")
        await pilot.pause()
    assert fake.closed_with is True and "stopped" in app.farewell


async def test_attached_refuses_start_stop(fake, make_app):
    fake.snap["attached"] = True
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("s", "x", "r")
        await pilot.pause()
        assert fake.calls == []
        assert not isinstance(app.screen, ChoiceScreen)


async def test_help_lists_every_key(fake, make_app):
    app = make_app()
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        assert ACTIONS[0].help in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(help_table())
    text = console.export_text()
    for a in actions_of(SERVER_OWNERS):
        assert a.help in text and key_text(a) in text, a.action
    assert "Set threshold N (asks; validated)" not in text  # the fleet screen's keys are on its own help


async def test_palette_offers_every_action(fake, make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        provider = ConsoleCommands(app.screen)
        titles = [hit.text async for hit in provider.discover()]
        wanted = [a for a in actions_of(SERVER_OWNERS) if a.action not in PALETTE_EXCLUDE]
        assert len(titles) == len(wanted)
        for a in wanted:
            assert any(a.help in str(t) for t in titles), a.action
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert type(app.screen).__name__ == "CommandPalette"


async def test_small_terminal_collapses_secondary_panels(fake, make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.query_one("#timeline").display or app.query_one("#timeline").region.height == 0
        text = screen_text(app)
        assert "TARGET-ONLY" in text and "verify" in text and "FOLLOW" in text
        await pilot.press("p")
        await pilot.pause()
        assert app.query_one("#verify").region.height > 0
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        for wid in ("#timeline", "#verify", "#gpus", "#live"):
            assert app.query_one(wid).region.height > 0, wid


async def test_nvml_unavailable_shows_na_row(fake, make_app):
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        assert "N/A" in screen_text(app) and "NVML Shared Library Not Found" in screen_text(app)


async def test_verification_evidence_on_focus(fake, make_app):
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        assert "evidence:" not in screen_text(app)
        app.query_one("#verify").focus()
        await pilot.press("down")
        await pilot.pause()
        assert "evidence: [TP0] Dynamic speculation disable enabled" in screen_text(app)


async def test_garbage_snapshot_does_not_crash(fake, make_app):
    fake.snap = {
        "run": "nonsense",
        "spec": {"threshold": "x", "mode": 3},
        "series": {"batch": [["a"]]},
        "switches": [None, 5, {"mode": None}],
        "gpus": {"available": True, "devices": [7]},
        "verify": {"layers": "no"},
        "per_mode": [],
    }
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        await pilot.press("plus")
        await pilot.pause()
        assert "MODE ?" in screen_text(app)


async def test_no_server_offers_launch_or_launches(fake, make_app):
    fake.snap["run"]["state"] = "stopped"
    app = make_app(launch="offer")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen) and "Launch it now?" in screen_text(app)
        await pilot.press("enter")  # default: yes
        await pilot.pause()
        assert fake.calls == [("launch",)]
    fake.calls.clear()
    app = make_app(launch="auto")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert fake.calls == [("launch",)] and not isinstance(app.screen, ChoiceScreen)


def test_switch_logged_by_every_rank_shows_once():
    from console.widgets.timeline import merge_ranks

    sw = Switch("2026-11-29T10:00:01", "target_only", 7, 5)
    rows = merge_ranks([replace(sw, rank="TP0"), replace(sw, rank="TP1"), replace(sw, ts="2026-11-29T10:00:09", rank="TP0")])
    assert [r.rank for r in rows] == ["TP0,TP1", "TP0"]


async def test_ctrl_q_asks_too(fake, make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert fake.closed_with is None and app.return_code is None


async def test_unreachable_server_mode_is_marked_stale(fake, make_app):
    fake.snap["server"].update(reachable=False, error="connection refused")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "UNREACHABLE  last TARGET-ONLY" in text and "unreachable: connection refused" in text


async def test_gpu_rows_with_nvml(fake, make_app):
    fake.snap["gpus"] = {
        "available": True,
        "reason": None,
        "devices": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "util": 97,
                "mem_used_mb": 120000,
                "mem_total_mb": 143771,
                "power_w": 612.4,
                "temp_c": 71,
                "pids": [4243],
            },
            {
                "index": 1,
                "name": "NVIDIA H200",
                "util": None,
                "mem_used_mb": None,
                "mem_total_mb": 143771,
                "power_w": None,
                "temp_c": None,
                "pids": [],
            },
        ],
    }
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "NVIDIA H200" in text and "97%" in text and "120000/143771 MB" in text
        assert "612 W" in text and "71\u00b0C" in text and "4243" in text and "N/A" not in text


def test_the_split_says_it_is_this_runs_after_a_restart():
    from console.widgets.timeline import per_mode_line  # noqa: PLC0415
    from server_control.model.snapshot import Timeline  # noqa: PLC0415

    assert "(this run; 3 switches before)" in per_mode_line(Timeline(earlier=3)).plain
    assert "(this run; 1 switch before)" in per_mode_line(Timeline(earlier=1)).plain
    assert "before" not in per_mode_line(Timeline()).plain, "no earlier run: nothing to say"
