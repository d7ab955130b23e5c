"""The console shows what the patch now reports: the switch off and why (on the status
line, with a SWITCH OFF badge), TP ranks that disagree, and the accept length over
speculative steps only. Against the real simulator through the real Session, and the
snapshot part's reading of the patch's /server_info entries."""

from __future__ import annotations

import pytest

from console.app import SpecConsoleApp
from server_control.model.switch_health import SwitchHealth
from server_control.session.session import Session
from tests.console.screen_text import screen_text, wait_for
from tests.support.sim import start_sim

pytestmark = pytest.mark.timeout(120)
REASON = (
    "TP ranks disagree: TP1: could not build the target-only (steps=0) runtime state: "
    "RuntimeError('simulated by --sim-fail-build-rank'); ready: TP0; the switch is off on every rank"
)


def test_health_reads_the_patch_entries():
    on = {
        "active": True,
        "num_steps": 3,
        "verifies": 10,
        "accepted_drafts": 15,
        "ranks": [
            {"rank": 0, "active": True, "threshold": 8, "mode": "speculative"},
            {"rank": 1, "active": True, "threshold": 4, "mode": "speculative"},
        ],
    }
    health = SwitchHealth.from_states([on, dict(on, ranks=None, verifies=10, accepted_drafts=25)])
    assert health == SwitchHealth(
        active=True, reason=None, num_steps=3, accept_len=3.0, rank_fault="DP0 TP1 threshold=4 (TP0: threshold=8)"
    )
    off = SwitchHealth.from_states([{"enabled": False, "active": False, "reason": REASON}])
    assert (off.active, off.reason, off.accept_len) == (False, REASON, None)
    assert SwitchHealth.from_states([None]) == SwitchHealth()  # stock SGLang: nothing said
    assert SwitchHealth.from_json(off.to_json()) == off


@pytest.fixture
def sim(tmp_path):
    handle = start_sim(tmp_path, "--sim-fail-build-rank", "1", traffic="steady:3", time_scale=10, lifetime=120)
    try:
        yield handle.wait_ready()
    finally:
        handle.stop()


async def test_the_status_line_says_the_switch_is_off_and_why(sim):
    app = SpecConsoleApp(Session.attach(sim.url, poll_interval_s=0.25))
    async with app.run_test(size=(250, 30)) as pilot:
        await wait_for(pilot, lambda: "SWITCH OFF" in screen_text(app), what="the SWITCH OFF badge")
        text = screen_text(app)
        assert "off: TP ranks disagree: TP1: could not build the target-only" in text, text


async def test_the_live_panel_shows_acceptance_over_speculative_steps(tmp_path):
    handle = start_sim(tmp_path, traffic="steady:3", time_scale=10, lifetime=120)
    try:
        handle.wait_ready()
        app = SpecConsoleApp(Session.attach(handle.url, poll_interval_s=0.25))
        async with app.run_test(size=(160, 30)) as pilot:
            await wait_for(pilot, lambda: " spec " in screen_text(app), what="the 'spec' accept length")
            assert "SWITCH OFF" not in screen_text(app)
    finally:
        handle.stop()


def test_the_status_line_names_tp_ranks_whose_live_values_disagree():
    from console.widgets.status_bar import line_one
    from server_control.model.snapshot import SessionSnapshot
    from tests.console.fakes import sample_snapshot

    raw = sample_snapshot()
    fault = "TP1 threshold=4 (TP0: threshold=8)"
    raw["spec"]["health"] = {"active": True, "reason": None, "rank_fault": fault}
    assert f"TP ranks disagree: {fault}" in line_one(SessionSnapshot.from_json(raw)).plain
    raw["spec"]["health"]["rank_fault"] = None
    assert "disagree" not in line_one(SessionSnapshot.from_json(raw)).plain
