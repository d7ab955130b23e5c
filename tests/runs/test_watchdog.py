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
        os.killpg(first.pgid, signal.SIGSTOP)                  # hung, not dead
        await until(lambda: sup.record is not None and sup.record.pid != first.pid, timeout=60,
                    what="the watchdog's restart")
        groups.add(sup.record.pgid)
        await until(lambda: sup.state == RunState.READY, what="ready again")
        assert sup.restarts == 1 and alive(old) == []          # the hung run is gone, all of it
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
