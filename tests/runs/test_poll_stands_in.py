"""A poll the run's server answered stands in for a health check (issue 24: an idle console
probed `/health` every second beside the poller's `/server_info`): while the session's polls
are answered the supervisor probes a ready run only every PROBE_AT_LEAST_EVERY_S; a hung
server (its polls fail) is still found unhealthy, and a server whose health path fails while
`/server_info` answers is found at the next forced probe. Real simulator, real session."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from server_control.config.profile import load_profile
from server_control.model.vocabulary import RunState
from server_control.session.run_backends import ProfileRun
from server_control.session.session import Session
from server_control.supervision.supervisor import Supervisor
from tests.support.wait import until


def _no_watchdog(path):
    path.write_text(path.read_text().replace("failures = 2\n", "failures = 2\nwatchdog = false\n"))
    return load_profile(path)


def _sup(session: Session) -> Supervisor:
    assert isinstance(session.run, ProfileRun)
    return session.run.sup


async def _ready_session(profile, groups) -> Session:
    session = Session.for_profile(profile, poll_interval_s=0.2)
    await session.start()
    assert (await session.launch()).done
    groups.add(_sup(session).record.pgid)
    await until(lambda: session.snapshot().run.state == "ready" and session.snapshot().server.reachable, what="ready")
    return session


async def test_answered_polls_stand_in_for_the_health_probe(make_profile, groups):
    session = await _ready_session(_no_watchdog(make_profile("s", tp=1)), groups)
    watch = _sup(session).health_watch
    try:
        await until(lambda: time.monotonic() - watch._probed_at > 0.5, what="the polls standing in")
        probes, polls = watch.probes, session.polls
        await asyncio.sleep(4.0)  # [health] interval_s 0.2: 20 probes before
        assert session.polls > polls, "the session did not poll"
        assert watch.probes - probes <= 1, f"{watch.probes - probes} health probes in 4 s while the polls were answered"
        assert _sup(session).state == RunState.READY
    finally:
        await session.close(stop_server=True)


async def test_a_hung_server_is_unhealthy_while_the_session_polls(make_profile, groups):
    session = await _ready_session(_no_watchdog(make_profile("h", tp=1)), groups)
    sup = _sup(session)
    try:
        await asyncio.sleep(1.0)  # polls standing in
        os.killpg(sup.record.pgid, signal.SIGSTOP)  # hung: the polls fail too
        t0 = time.monotonic()
        await until(lambda: sup.state == RunState.UNHEALTHY, timeout=30, what="unhealthy")
        took = time.monotonic() - t0
        # the last answer stands in for at most one poll period (the quiet poller's 3 s and the
        # slack), then every check is a probe again: 2 failures of the 2 s timeout each (an
        # answer standing in until the forced probe would take 10 s + 4 s)
        assert took < 3.5 + 2 * 2.0 + 2.5, f"unhealthy after {took:.1f} s"
        os.killpg(sup.record.pgid, signal.SIGCONT)
        await until(lambda: sup.state == RunState.READY, timeout=30, what="ready again")
    finally:
        os.killpg(sup.record.pgid, signal.SIGCONT)
        await session.close(stop_server=True)


async def test_a_failing_health_path_is_found_while_polls_answer(make_profile, groups):
    # /health answers 503 from ~1 s of serving on; /server_info goes on answering: the forced
    # probe (PROBE_AT_LEAST_EVERY_S, 10 s) finds it
    session = await _ready_session(_no_watchdog(make_profile("f", tp=1, sim_extra="health_fail_after = 20")), groups)
    sup = _sup(session)
    try:
        await until(lambda: sup.state == RunState.UNHEALTHY, timeout=25, what="unhealthy")
        assert "HTTP 503" in (sup.health_error or "")
        assert session.snapshot().server.reachable, "the polls stopped being answered: not the case this test is about"
    finally:
        await session.close(stop_server=True)
