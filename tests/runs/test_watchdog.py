"""A hung server (SIGSTOP: the process lives, /health never answers) is unhealthy after
[health] failures checks and the watchdog restarts it; `status` from another terminal
says "unhealthy", not "starting"."""

from __future__ import annotations

import asyncio
import json
import os
import signal

from server_control.config.profile import load_profile
from server_control.model.vocabulary import RunState
from server_control.state import runs
from server_control.supervision.supervisor import Supervisor
from tests.support.cli import cli
from tests.support.procs import alive
from tests.support.wait import until


async def test_sigstopped_server_is_restarted_by_the_watchdog(make_profile, groups):
    profile = load_profile(make_profile("w", tp=2, backoff=0.2, grace=1.0))
    errors = []
    sup = Supervisor(profile, on_change=lambda s: errors.append(s.last_error))
    first = await sup.launch()
    groups.add(first.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        await until(lambda: len(sup.processes()) >= 3, what="leader and two TP ranks")
        old = [p.pid for p in sup.processes()]
        os.killpg(first.pgid, signal.SIGSTOP)  # hung, not dead
        await until(lambda: sup.record is not None and sup.record.pid != first.pid, timeout=60, what="the watchdog's restart")
        groups.add(sup.record.pgid)
        await until(lambda: sup.state == RunState.READY, what="ready again")
        assert sup.restarts == 1 and alive(old) == []  # the hung run is gone, all of it
        assert any(e and "watchdog: 2 health checks failed in a row" in e for e in errors), errors
        assert any(e and "unhealthy, stopped by the watchdog" in e for e in errors), errors
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert (await sup.stop()).ok


async def test_status_elsewhere_says_unhealthy_for_a_hung_server(make_profile, groups):
    path = make_profile("u", tp=1)
    path.write_text(path.read_text().replace("failures = 2\n", "failures = 2\nwatchdog = false\n"))
    sup = Supervisor(load_profile(path))
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        os.killpg(rec.pgid, signal.SIGSTOP)
        await until(lambda: sup.state == RunState.UNHEALTHY, timeout=30, what="unhealthy")
        await until(lambda: (runs.load_record("u") or rec).health == RunState.UNHEALTHY, what="health in the record")
        r = await asyncio.to_thread(cli, "status", "--profile", str(path), "--json")
        assert json.loads(r.stdout)["run"]["state"] == "unhealthy", r.stdout[:400]
        assert sup.record.pid == rec.pid and sup.restarts == 0  # watchdog off: left alone
    finally:
        os.killpg(rec.pgid, signal.SIGCONT)
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert (await sup.stop()).ok


async def test_a_stop_from_elsewhere_is_not_a_watchdog_crash(make_profile, groups, state_dir):
    """`stop` (or `restart`) in another terminal marks the record stopping, then signals:
    a server slow to exit stops answering /health first. The supervising process must not
    call that a hang: no watchdog kill, no "crashed", no restart; the exit is a stop."""
    profile = load_profile(make_profile("ws", tp=1, backoff=0.2))
    states: list[RunState] = []
    sup = Supervisor(profile, on_change=lambda s: states.append(s.state))
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY and sup.supervising, what="ready and supervising")
        # the first step of `stop` elsewhere (supervisor.py: Supervisor.stop), then a server
        # that takes its time to exit: SIGSTOPped, it neither answers nor exits
        await runs.update_record("ws", state_dir, rec.pid, lambda r: setattr(r, "stopping", True))
        os.killpg(rec.pgid, signal.SIGSTOP)
        await until(lambda: sup.state == RunState.UNHEALTHY, timeout=30, what="unhealthy (it does not answer)")
        await asyncio.sleep(3 * 0.2 * 2 + 1.0)  # well past [health] failures x interval_s
        assert alive([rec.pid]) == [rec.pid], "the watchdog killed a server that was being stopped"
        assert RunState.CRASHED not in states and sup.restarts == 0, states
        other = Supervisor(profile)  # `stop` elsewhere goes on: SIGTERM + SIGCONT
        assert (await other.stop()).ok
        await until(lambda: sup.state == RunState.STOPPED, timeout=30, what="stopped")
        assert RunState.CRASHED not in states and sup.restarts == 0, states
        assert runs.load_record("ws") is None
    finally:
        if alive([rec.pid]):
            os.killpg(rec.pgid, signal.SIGCONT)
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
