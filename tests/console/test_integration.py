"""The console against the real simulator through the real Session (no fakes except the
NVML edge in one test): keys change the threshold on the server and the read-back shows;
filter, search and follow on the live log; verification reaches three passes; quitting
leaves the server running (then this test stops it by its process group)."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import time
import types

import httpx
import pytest
from textual.widgets import Input

from console.app import SpecConsoleApp
from console.cli.demo_target import demo_profile
from server_control.session.session import Session
from server_control.state import runs
from tests.console.screen_text import screen_text, wait_for
from tests.support.sim import start_sim

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    handle = start_sim(
        tmp_path_factory.mktemp("sim"), "--decode-log-interval", "5", traffic="wave:12:20", time_scale=10, lifetime=300
    )
    try:
        handle.wait_ready()
        yield handle
    finally:
        handle.stop()


def server_thresholds(url: str) -> list[int]:
    info = httpx.get(url + "/server_info", timeout=5).json()
    return [st["speculative_disable_batch_threshold"] for st in info["internal_states"]]


def set_server_threshold(url: str, n: int) -> None:
    httpx.post(url + "/set_internal_state", json={"server_args": {"speculative_disable_batch_threshold": n}}, timeout=5)


def attached(sim, **kw) -> SpecConsoleApp:
    return SpecConsoleApp(Session.attach(sim.url, log_path=sim.log_path, poll_interval_s=0.25, **kw))


async def test_threshold_keys_reach_every_rank_and_read_back(sim):
    set_server_threshold(sim.url, 5)
    app = attached(sim)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "N=5" in screen_text(app), what="N=5 read from the server")
        await pilot.press("plus")
        await wait_for(pilot, lambda: "N=6 applied" in screen_text(app), what="N=6 applied")
        assert server_thresholds(sim.url) == [6]
        await pilot.press("equals_sign")
        app.screen.query_one(Input).value = "-1"
        await pilot.press("enter")
        # refused locally, the prompt stays open (waited for: a loaded machine repaints late)
        await wait_for(pilot, lambda: "must be" in screen_text(app), what="the refusal")
        assert app.screen.query_one(Input).value == "-1"
        app.screen.query_one(Input).value = "9"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "N=9 applied" in screen_text(app), what="N=9 applied")
        assert server_thresholds(sim.url) == [9]
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: "N=8 applied" in screen_text(app), what="N=8 applied")
        assert server_thresholds(sim.url) == [8]
        await pilot.press("F")  # auto -> speculative (forced), read back from the server
        await wait_for(pilot, lambda: "forced speculative" in screen_text(app), what="forced mode shown")
        await pilot.press("F")
        await wait_for(pilot, lambda: "forced target-only" in screen_text(app), what="forced target-only")
        await wait_for(pilot, lambda: "TARGET-ONLY" in screen_text(app), what="mode follows the force")
        await pilot.press("F")
        await wait_for(pilot, lambda: "forced" not in screen_text(app), what="back to auto")
        await app.session.close()
    set_server_threshold(sim.url, 5)


async def test_verification_reaches_three_passes_and_switches_show(sim):
    app = attached(sim)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(pilot, lambda: "verify \u2713\u2713\u2713 pass" in screen_text(app), timeout=60, what="three passes")
        # a timeline row (time, mode, batch): the per-mode line names both modes even with
        # no switch, so the words alone prove nothing
        row = re.compile(r"\d\d:\d\d:\d\d +(target-only|speculative) +\d+ ")
        await wait_for(
            pilot,
            lambda: row.search(screen_text(app)) and "no switch yet" not in screen_text(app),
            what="switches in the timeline",
        )
        await pilot.press("v")
        await wait_for(
            pilot, lambda: "verification: pass" in [n.message for n in app._notifications], what="re-run verification toast"
        )
        await app.session.close()


async def test_filter_search_follow_on_the_live_log(sim):
    app = attached(sim)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.log_view
        await wait_for(pilot, lambda: any(r.kind == "spec_switch" for r in view.shown_records()), what="a switch line")
        await pilot.press("ampersand")
        app.screen.query_one(Input).value = "switched to"
        await pilot.press("enter")
        await pilot.pause(0.3)
        kinds = {r.kind for r in view.shown_records()}
        assert kinds == {"spec_switch"}
        await pilot.press("ampersand")
        app.screen.query_one(Input).value = "!Decode batch"
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert not any("Decode batch" in r.raw for r in view.shown_records())
        await pilot.press("escape")
        await pilot.press("slash")
        app.screen.query_one(Input).value = "Dynamic speculation disable enabled"
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert view.search_hits >= 1 and not view.follow  # view jumped up
        assert "TP0,1] Dynamic speculation disable enabled" in screen_text(app)  # both TP ranks, one row
        before = view.new_while_paused
        await wait_for(pilot, lambda: view.new_while_paused > before, what="new lines counted while paused")
        assert "new lines" in screen_text(app)
        await pilot.press("end")
        await pilot.pause(0.2)
        assert view.follow and view.new_while_paused == 0
        await app.session.close()


async def test_nvml_absent_shows_na(sim):
    def no_library():
        raise RuntimeError("NVML Shared Library Not Found")

    app = attached(sim, nvml=types.SimpleNamespace(nvmlInit=no_library))
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(pilot, lambda: "NVML Shared Library Not Found" in screen_text(app), what="N/A row")
        assert "N/A" in screen_text(app)
        await app.session.close()


async def test_quit_leaves_server_running_and_next_console_adopts(tmp_path):
    state = tmp_path / "state"
    profile = demo_profile(state, time_scale=10)
    profile = dataclasses.replace(profile, sim={**profile.sim, "max_lifetime": 120, "traffic": "idle"})
    app = SpecConsoleApp(Session.for_profile(profile, state_dir=state, poll_interval_s=0.25), launch="auto")
    rec = None
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: "READY" in screen_text(app), timeout=60, what="READY")
            rec = runs.load_record(profile.name, state)
            await pilot.press("q")
            await pilot.press("enter")  # default: leave it running
            await wait_for(pilot, lambda: app.return_code is not None, what="exit")
        assert rec is not None and rec.is_live(), "the server must outlive the console"
        assert "left running" in app.farewell
        # a second console adopts the same run (no second launch), quits and stops it
        app2 = SpecConsoleApp(Session.for_profile(profile, state_dir=state, poll_interval_s=0.25), launch="auto")
        async with app2.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: f"pid {rec.pid}" in screen_text(app2), timeout=30, what="adopted")
            await pilot.press("q", "s")  # stop
            await wait_for(pilot, lambda: app2.return_code is not None, timeout=30, what="exit")
        deadline = time.monotonic() + 15
        while rec.is_live() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not rec.is_live()
    finally:
        if rec is not None:
            try:
                os.killpg(rec.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
