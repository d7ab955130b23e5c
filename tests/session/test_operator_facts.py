"""What the operator's screen needs from the session (issue 14), against the real
simulator: a dead server's last known state with its time, console lines in the log where
it stopped and came back and where a new run begins, the switch rate, and hysteresis/dwell
changes that say which setting they are."""

from __future__ import annotations

import asyncio

from server_control.config.profile import load_profile
from server_control.protocol import decision
from server_control.session.session import Session
from tests.support.sim import WAVE, start_sim
from tests.support.wait import until


def console_lines(session) -> list[str]:
    return [r.raw for r in session.store.since(0) if r.kind == "console"]


async def test_dead_server_keeps_its_last_known_state_with_its_time_and_the_log_says_so(tmp_path):
    """Before: the threshold and mode vanished (the chart lost N and recoloured every bar)
    and nothing in the log said that the server had gone."""
    first = start_sim(tmp_path, "--decode-log-interval", "5", tp=2, threshold=5, traffic="steady:7", lifetime=120).wait_ready()
    session = Session.attach(first.url, log_path=first.log_path, poll_interval_s=0.2)
    await session.start()
    try:
        await until(
            lambda: session.snapshot().live.batch == 7 and session.snapshot().spec.mode == "target_only",
            what="live batch 7, target-only",
        )
        first.stop(grace=0.0)
        await until(lambda: not session.snapshot().server.reachable, what="unreachable")
        await asyncio.sleep(0.5)
        snap = session.snapshot()
        assert snap.spec.threshold == 5 and snap.spec.mode == "target_only", snap.spec
        # the last batch a poll saw: steady:7 holds 7, 6 for a moment as a finished request's
        # successor arrives (a poll between the wait above and the kill can see that)
        assert snap.live.batch in (6, 7) and snap.live.ts is not None and snap.live.ts < session.last.ts, snap.live
        assert [s for s in snap.series.mode if s[1] == 1], "each point knows its mode"
        lines = console_lines(session)
        assert len(lines) == 1 and "the server stopped answering" in lines[0] and first.url in lines[0]
        second = start_sim(tmp_path, tp=2, threshold=5, lifetime=120, port=first.port)
        try:
            await until(lambda: session.snapshot().server.reachable, what="answers again")
            await until(lambda: len(console_lines(session)) == 2, what="the second console line")
            assert "answers again" in console_lines(session)[1]
        finally:
            second.stop()
    finally:
        await session.close()


async def test_switch_rate_and_settings_changes_name_their_key(tmp_path):
    sim = start_sim(tmp_path, "--decode-log-interval", "10", tp=2, threshold=5, traffic=WAVE, lifetime=120)
    session = Session.attach(sim.wait_ready().url, log_path=sim.log_path, poll_interval_s=0.2)
    await session.start()
    try:
        await until(lambda: session.snapshot().spec.switch_rate.count >= 4, what="four switches", timeout=60)
        rate = session.snapshot().spec.switch_rate
        assert rate.per_min > 0 and rate.count >= 4
        assert session.snapshot().spec.hysteresis == 1
        result = await session.set_setting(decision.HYSTERESIS_KEY, 3)
        assert result.done and result.change.key == decision.HYSTERESIS_KEY, result
        assert session.snapshot().last_change.key == decision.HYSTERESIS_KEY
        await until(lambda: session.snapshot().spec.hysteresis == 3, what="hysteresis 3 polled")
        assert session.snapshot().spec.low_mark == 2
        n = await session.set_threshold(6)
        assert n.change.key == decision.THRESHOLD_KEY
    finally:
        await session.close()
        sim.stop()


async def test_a_new_runs_log_begins_with_a_console_line(sim_profile):
    """Before: after a restart the log went on with no divider between the runs."""
    session = Session.for_profile(load_profile(sim_profile), poll_interval_s=0.2)
    await session.start()
    try:
        assert (await session.launch()).done
        await until(lambda: session.snapshot().run.state == "ready", what="ready")
        first_log = session.snapshot().logs.path
        assert (await session.restart()).done
        await until(lambda: session.snapshot().logs.path not in (None, first_log), what="the new log followed")
        new_log = session.snapshot().logs.path
        await until(lambda: any(new_log in line for line in console_lines(session)), what="the divider")
        (divider,) = [line for line in console_lines(session) if "new run" in line]
        assert new_log in divider
    finally:
        await session.stop()
        await session.close()
