"""`A` in the console against a real simulator through the real Session: the advisor's
view shows the suggestion; enter asks, then applies it through the same path as `=` (read
back on every rank, journaled)."""

import httpx
import pytest

from console.app import SpecConsoleApp
from server_control.session.session import Session
from server_control.state import journal
from tests.console.screen_text import screen_text, wait_for
from tests.support.advice import wait_steps

pytestmark = pytest.mark.timeout(150)


async def test_the_advice_view_applies_the_suggestion_after_a_yes(sim_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    sim = sim_factory(
        "--enable-metrics", "--sim-explore-share", "0.1", threshold=8, traffic="phases:s=10000,c=1-14,period=12", time_scale=20
    )
    sim.wait_ready()
    wait_steps(sim.url, steps=1500)
    app = SpecConsoleApp(Session.attach(sim.url, log_path=sim.log_path, poll_interval_s=0.25))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: "N=8" in screen_text(app), what="N=8 read from the server")
        await wait_for(pilot, lambda: "advice: N=" in screen_text(app), what="the strip on the main screen", timeout=20)
        await pilot.press("A")
        await wait_for(pilot, lambda: "would give" in screen_text(app), what="the advice", timeout=20)
        adv = app.screen.advice
        n = adv.suggested
        assert n is not None and abs(n - 4) <= 1 and f"N={n} would give" in screen_text(app)
        await wait_for(pilot, lambda: "accept length" in screen_text(app), what="acceptance shown")
        await pilot.press("enter")
        await wait_for(pilot, lambda: f"Set N={n}" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: f"N={n} applied" in screen_text(app), what="applied and read back")
        info = httpx.get(sim.url + "/server_info", timeout=5).json()
        assert [st["speculative_disable_batch_threshold"] for st in info["internal_states"]] == [n]
        # the strip on the main screen speaks of the applied N within seconds (it lagged by
        # up to its 30 s period, saying "N={n} would give ..." of the N already set)
        from console.widgets.advice_strip import AdviceStrip  # noqa: PLC0415

        strip = app.screen.query_one(AdviceStrip)
        await wait_for(
            pilot, lambda: strip.advice is not None and strip.advice.current == n, what="the strip at the new N", timeout=5
        )
        assert f"N={n} would give" not in screen_text(app)
        entries = journal.read(tmp_path / "state")
        assert any(e.key == "speculative_disable_batch_threshold" and e.new == n and e.old == 8 for e in entries), [
            e.words() for e in entries
        ]
        await app.session.close()
