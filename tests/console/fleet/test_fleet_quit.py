"""The fleet screen's `q`: a question, as on the single-server screen ("Stop the fleet
too?"), and Enter leaves the fleet running. A local member launched from the fleet console
starts under its own detached `specconsole supervise` (issue 34), so leaving hands nothing
over: the member's supervisor was there from the start, and restarts a crash after the
console is gone.
Real: a local simulator member launched from the fleet screen under Pilot; its supervisor
is a real process in its own session (stopped by its group), the simulator by its group."""

from __future__ import annotations

import os
import signal
import time

import psutil

from console.dialogs.confirm import ChoiceScreen
from console.fleet.app import FleetApp
from console.run_supervisor import member_supervisors
from server_control.fleet.fleet import Fleet
from server_control.fleet.spec import parse_fleet
from server_control.state import runs
from tests.console.screen_text import screen_text, wait_for
from tests.fleet.conftest import write_profile


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def test_fleet_q_asks_and_enter_leaves_each_member_with_its_own_supervisor(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    profile = write_profile(tmp_path, "fq", tp=1)
    spec = parse_fleet({"name": "quit", "poll_interval_s": 0.5, "members": {"a": {"profile": str(profile)}}})
    fleet = Fleet(spec, state, supervisors=member_supervisors)
    app = FleetApp(fleet)
    groups: set[int] = set()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.fleet_screen.order == ["a"], "the row")
            await pilot.press("L")
            await wait_for(pilot, lambda: app.fleet_screen.last_rows["a"]["state"].plain == "ready", "ready", 60)
            rec = runs.load_record("fq", state)
            groups.add(rec.pgid)
            who = rec.supervisor
            assert who is not None and who["kind"] == "run" and who["pid"] != os.getpid(), who
            groups.add(who["pid"])
            assert os.getsid(who["pid"]) == who["pid"]  # its own session
            assert not fleet.members["a"].session.run.sup.supervising  # the console is a client
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ChoiceScreen)
            text = screen_text(app)
            assert "Stop the fleet too?" in text and "1 of 1 local member(s) have their" in text, text
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.return_code is not None, "exit")
        assert app.leaving
        assert psutil.pid_exists(who["pid"]) and rec.is_live()  # left running, still supervised
        os.killpg(rec.pgid, signal.SIGKILL)  # a crash after the console left
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            new = runs.load_record("fq", state)
            if new is not None and new.pid != rec.pid and new.is_live():
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the member's crash was not restarted after the fleet console left")
        groups.add(new.pgid)
        assert new.restarts == 1 and (new.supervisor or {}).get("pid") == who["pid"]
    finally:
        for rec_ in runs.list_records(state) if state.exists() else []:
            groups.add(rec_.pgid)
        for pgid in groups:
            _kill_group(pgid)
