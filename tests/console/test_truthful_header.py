"""The status line tells the truth (issue 23 items 1 and 4): a server that is not this
run's is named as such, with no mode, N or traffic of it; a run stopped on purpose reads
STOPPED (not UNREACHABLE) and quitting it asks nothing; a hysteresis or force change is
not drawn in the N slot. Pilot over the fake session (the real session's side:
tests/session/test_not_our_server.py)."""

from __future__ import annotations

from console.dialogs.confirm import ChoiceScreen
from tests.console.screen_text import screen_text

FOREIGN = "not this run's server: port 30000 answers, but from pid 999 (python -m other), not a process of this run"


async def test_not_this_runs_server_is_said_and_nothing_of_it_shown(fake, make_app):
    fake.snap["server"].update(reachable=False, error=FOREIGN, foreign=True)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        first, second = screen_text(app).splitlines()[:2]
        assert "NOT THIS RUN'S SERVER" in first and "steering off" in first
        assert "N=" not in first and "TARGET-ONLY" not in first and "switches" not in first
        assert "not this run's server: port 30000" in second and "UNREACHABLE" not in first


async def test_a_run_stopped_on_purpose_reads_stopped_and_quits_without_a_question(fake, make_app):
    fake.snap["run"].update(state="stopped", pid=None, processes=[])
    fake.snap["server"].update(reachable=False, error="connection refused")
    app = make_app(what="simulator")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        first, second = screen_text(app).splitlines()[:2]
        assert first.lstrip().startswith("STOPPED") and "UNREACHABLE" not in first
        assert "unreachable" not in second
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, ChoiceScreen)  # before: "leave the simulator running?"
    assert fake.closed_with is False


async def test_a_hysteresis_change_is_not_drawn_in_the_n_slot(fake, make_app):
    fake.snap["last_change"] = {
        "requested": 2,
        "state": "pending",
        "detail": "sent",
        "ranks": [],
        "key": "speculative_disable_hysteresis",
    }
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        first = screen_text(app).splitlines()[0]
        assert "N=5 \u2192 2" not in first and "hysteresis \u2192 2 pending" in first, first
        fake.snap["last_change"] = {
            "requested": "speculative",
            "state": "pending",
            "detail": "sent",
            "ranks": [],
            "key": "speculative_disable_force_mode",
        }
        app.server.refresh_snapshot()
        await pilot.pause()
        first = screen_text(app).splitlines()[0]
        assert "N=5 \u2192 speculative" not in first and "force \u2192 speculative pending" in first, first
