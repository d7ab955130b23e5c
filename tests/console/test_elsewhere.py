"""The console says so when another client changes N on its server."""

from __future__ import annotations

from console.app import SpecConsoleApp
from server_control.control.settings import Control
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
            assert (await other.set_threshold(8)).state == "applied"  # a client with no journal (curl-like)
        finally:
            await other.aclose()
        await wait_for(pilot, lambda: "N changed elsewhere: 5 -> 8" in screen_text(app), what="the change told")
