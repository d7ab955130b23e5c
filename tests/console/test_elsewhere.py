"""The console says so when another client changes N on its server."""

from __future__ import annotations

import re

import httpx

from console.app import SpecConsoleApp
from server_control.control.settings import Control
from server_control.protocol.runtime_settings import THRESHOLD
from server_control.protocol.tuner import AUTO_TUNE_KEY
from server_control.session.session import Session
from tests.console.screen_text import screen_text, wait_for


async def test_the_screen_shows_a_change_another_client_made(sim_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    sim = sim_factory(tp=1, threshold=5)
    sim.wait_ready()
    app = SpecConsoleApp(Session.attach(sim.url, poll_interval_s=0.25))
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: "N=5" in screen_text(app), what="N=5")
        other = Control(sim.url)
        try:
            assert (await other.set_setting(THRESHOLD.key, 8)).state == "applied"  # a client with no journal (curl-like)
        finally:
            await other.aclose()
        await wait_for(pilot, lambda: "N changed elsewhere: 5 -> 8" in screen_text(app), what="the change told")


async def test_the_screen_says_auto_tuned_for_the_servers_own_move(sim_factory, tmp_path, monkeypatch):
    """A server that tunes N itself: its move reads "auto-tuned 10 -> 9 (...)" with its evidence,
    never "N changed elsewhere" (control/server_tune.py).

    The tuner is held off until the console has polled: a move made before an observer's first
    poll is no news to it (journaled, not said), and on a loaded machine the tuner settled
    before the console's first poll (a three-worker fresh clone: N 10 -> 4, nothing said).
    Setting N turns the server's tuning off (the operator's N wins); the auto-tune key turns it
    on again once the console shows N=10 from a poll."""
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    sim = sim_factory(
        "--sim-auto-tune", "1-16", "--sim-explore-share", "0.1",
        threshold=10, traffic="phases:s=10000,c=1-14,period=12", time_scale=20,
    )  # fmt: skip
    sim.wait_ready()
    state = sim.url + "/set_internal_state"
    async with httpx.AsyncClient(timeout=10) as http:  # a client with no journal, as an operator's curl
        assert (await http.post(state, json={"server_args": {THRESHOLD.key: 10}})).json() == [True]  # tuning off
        app = SpecConsoleApp(Session.attach(sim.url, poll_interval_s=0.25))
        told = []
        async with app.run_test(size=(220, 30)) as pilot:
            await wait_for(pilot, lambda: "N=10" in screen_text(app), what="N=10 from a poll")
            assert (await http.post(state, json={"server_args": {AUTO_TUNE_KEY: 1}})).json() == [True]  # tuning on

            def seen() -> bool:
                text = screen_text(app)
                told.append("N changed elsewhere" in text)
                return re.search(r"auto-tuned \d+ -> \d+ \((target-only|speculation) faster", text) is not None

            await wait_for(pilot, seen, what="the server's own move told", timeout=60)
    assert not any(told), "a move of the server's own tuner was told as a change made elsewhere"
