"""The fleet screen's `q` (issue 23 item 2): a question, as on the single-server screen,
and Enter leaves the fleet running with each local member handed to a detached
`specconsole supervise`; before, `q` quit at once and the members were left unsupervised.
Real: a local simulator member launched from the fleet screen under Pilot; the detached
supervise is a real process (stopped by its pid), the simulator by its group."""

from __future__ import annotations

import os
import signal
import time

import psutil

from console.dialogs.confirm import ChoiceScreen
from console.fleet.app import FleetApp
from console.fleet.leaving import hand_off_fleet
from server_control.fleet.fleet import Fleet
from server_control.fleet.spec import parse_fleet
from server_control.state import runs
from tests.console.screen_text import screen_text, wait_for
from tests.fleet.conftest import write_profile


async def test_fleet_q_asks_and_enter_hands_the_members_off(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    profile = write_profile(tmp_path, "fq", tp=1)
    spec = parse_fleet({"name": "quit", "poll_interval_s": 0.5, "members": {"a": {"profile": str(profile)}}})
    fleet = Fleet(spec, state)
    app = FleetApp(fleet)
    rec = None
    handed = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.fleet_screen.order == ["a"], "the row")
            await pilot.press("L")
            await wait_for(pilot, lambda: app.fleet_screen.last_rows["a"]["state"].plain == "ready", "ready", 60)
            rec = runs.load_record("fq", state)
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ChoiceScreen)  # before: the app was gone
            assert "supervise" in screen_text(app) and "Leave" in screen_text(app)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.return_code is not None, "exit")
        assert app.leaving
        handed = hand_off_fleet(fleet)
        assert [h.member for h in handed] == ["a"] and handed[0].handed is not None, handed
        pid = handed[0].handed.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and ((runs.load_record("fq", state).supervisor or {}).get("kind") != "handoff"):
            time.sleep(0.2)
        who = runs.load_record("fq", state).supervisor
        assert who["kind"] == "handoff" and who["pid"] == pid and psutil.pid_exists(pid)
        assert rec is not None and rec.is_live()  # left running
    finally:
        for h in handed:
            if h.handed is not None:
                try:
                    os.kill(h.handed.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if rec is not None:
            try:
                os.killpg(rec.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
