"""The fleet screen shows each member's own suggestion and `A` applies each member's own N
after a yes (Pilot, the real FleetApp over two real simulators attached by URL, loopback):
read back on every member, journaled."""

import httpx
import pytest

from console.fleet.advice import FleetAdvice
from console.fleet.app import FleetApp
from server_control.fleet.fleet import Fleet
from server_control.fleet.spec import parse_fleet
from server_control.state import journal
from tests.console.screen_text import screen_text, wait_for
from tests.support.advice import wait_steps

pytestmark = pytest.mark.timeout(180)


def _n(url):
    return [
        st["speculative_disable_batch_threshold"] for st in httpx.get(url + "/server_info", timeout=5).json()["internal_states"]
    ]


async def test_each_member_gets_its_own_suggestion(sim_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    # the screen's strip reads every 30 s; the curves here grow 20x as fast: every 2 s from
    # its first read on (setting every_s after mount waits out the 30 s sleep already begun)
    strip_init = FleetAdvice.__init__

    def every_2_s(self, members, *, every_s=2.0, id=None):
        strip_init(self, members, every_s=2.0, id=id)

    monkeypatch.setattr(FleetAdvice, "__init__", every_2_s)
    chat = sim_factory(
        "--sim-kv-cost",
        "0.2",
        "--sim-explore-share",
        "0.1",
        threshold=8,
        traffic="phases:s=10000,c=1-14,period=12,ctx=500,p=0.777",
        time_scale=20,
    )
    summ = sim_factory(
        "--sim-kv-cost",
        "0.2",
        "--sim-explore-share",
        "0.1",
        threshold=5,
        traffic="phases:s=10000,c=2-18,period=12,ctx=4000,p=0.9",
        time_scale=20,
    )
    for sim in (chat, summ):
        sim.wait_ready()
    for sim in (chat, summ):
        wait_steps(sim.url, steps=300, timeout=90)
    spec = parse_fleet(
        {
            "name": "adv",
            "poll_interval_s": 0.5,
            "members": {"chat": {"url": chat.url, "gateway": False}, "summ": {"url": summ.url, "gateway": False}},
        }
    )
    fleet = Fleet(spec, tmp_path / "local")
    app = FleetApp(fleet)
    async with app.run_test(size=(200, 45)) as pilot:
        screen = app.fleet_screen
        await wait_for(pilot, lambda: screen.order == ["chat", "summ"], what="two rows")
        strip = screen.query_one(FleetAdvice)
        assert strip.every_s == 2.0

        def own_ways():  # each its own: down for chat (truth 4), up for summ (truth 8)
            plan = strip.plan(["chat", "summ"])
            return len(plan) == 2 and plan["chat"].suggested < 8 and plan["summ"].suggested > 5

        await wait_for(pilot, own_ways, what="each member's own suggestion", timeout=90)
        strip.every_s = 600.0  # hold the plan still while it is applied
        plan = strip.plan(["chat", "summ"])
        want = {m: a.suggested for m, a in plan.items()}
        text = screen_text(app)
        assert f"chat N=8 -> {want['chat']}" in text and f"summ N=5 -> {want['summ']}" in text
        await pilot.press("A")
        await wait_for(pilot, lambda: "Set each member's own suggested N?" in screen_text(app), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: "threshold on 2: 2 ok" in screen_text(app), what="applied on both", timeout=30)
        assert _n(chat.url) == [want["chat"]] and _n(summ.url) == [want["summ"]]
        entries = journal.read(tmp_path / "state")
        for old, new in ((8, want["chat"]), (5, want["summ"])):
            assert any(e.key == "speculative_disable_batch_threshold" and e.old == old and e.new == new for e in entries), [
                e.words() for e in entries
            ]
    await fleet.close()
