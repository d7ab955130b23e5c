"""Supervisor against the real simulator through the real process path: launch, ready,
refusals, crash injected and restarted with backoff, burst to FATAL, stop leaves nothing."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest

from server_control.config.profile import ProfileError, load_profile
from server_control.host import identity
from server_control.model.vocabulary import RunState
from server_control.state import runs
from server_control.state.runs import RunConflict
from server_control.supervision.supervisor import Supervisor
from tests.support.procs import alive
from tests.support.wait import until


async def test_launch_ready_refusals_and_stop_leaves_nothing(make_profile, groups, state_dir):
    profile = load_profile(make_profile("a", tp=2))
    changes = []
    sup = Supervisor(profile, on_change=lambda s: changes.append(s.state))
    rec = await sup.launch()
    groups.add(rec.pgid)
    assert sup.state == RunState.STARTING and rec.pid == rec.pgid == rec.sid
    assert runs.load_record("a") == rec
    assert (state_dir / "runs" / "a.json").stat().st_mode & 0o777 == 0o600
    assert await sup.wait_ready(60) == RunState.READY
    async with httpx.AsyncClient(trust_env=False) as c:
        assert (await c.get(profile.url + "/health")).status_code == 200
    # the sim's TP ranks are spawned children: the run has leader + 2 ranks (+ helpers)
    await until(lambda: len(sup.processes()) >= 3, what="leader and two TP ranks")
    pids = [p.pid for p in sup.processes()]
    assert sup.status_json()["state"] == RunState.READY and sup.status_json()["pid"] == rec.pid

    with pytest.raises(RunConflict, match="already running: pid"):
        await Supervisor(profile).launch()
    other = load_profile(make_profile("b", port=profile.port))
    with pytest.raises(RunConflict, match="port .* held by the live run of profile 'a'"):
        await Supervisor(other).launch()
    assert Supervisor(profile).adopt().pid == rec.pid  # pid + start time + command match

    res = await sup.stop()
    assert res.ok and res.was_running and not res.remaining, res.message
    assert set(pids) <= set(res.signalled)
    assert alive(pids) == [] and sup.state == RunState.STOPPED and runs.load_record("a") is None
    assert changes[0] == RunState.STARTING and RunState.READY in changes and changes[-1] == RunState.STOPPED
    again = await sup.stop()
    assert again.ok and not again.was_running


async def test_busy_port_outside_any_run_is_a_profile_error(make_profile, state_dir):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        profile = load_profile(make_profile("c", port=s.getsockname()[1]))
        with pytest.raises(ProfileError, match=r"c\.toml: \[server\] port: .* is busy"):
            await Supervisor(profile).launch()
    assert runs.load_record("c") is None


async def test_killed_server_is_restarted_with_backoff_and_new_log(make_profile, groups):
    profile = load_profile(make_profile("k", tp=1, backoff=0.2))
    sup = Supervisor(profile)
    first = await sup.launch()
    groups.add(first.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        assert sup.supervising
        os.killpg(first.pgid, signal.SIGKILL)  # the crash
        await until(lambda: sup.record is not None and sup.record.pid != first.pid, what="restart")
        second = sup.record
        groups.add(second.pgid)
        await until(lambda: sup.state == RunState.READY, what="ready again")
        assert sup.restarts == 1 and sup.exit_code is None and sup.backoff_history == [0.2]
        assert second.log_path != first.log_path and Path(first.log_path).exists()
        assert second.log_paths == [first.log_path] and second.restarts == 1
        assert runs.load_record("k").pid == second.pid
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    res = await sup.stop()
    assert res.ok and identity.run_processes(second.identity()) == []


async def test_crash_burst_goes_fatal_with_exit_code_and_log_tail(make_profile, groups):
    profile = load_profile(make_profile("f", tp=1, backoff=0.1, burst=3, sim_extra="crash_after = 0.5"))
    states = []
    sup = Supervisor(profile, on_change=lambda s: states.append(s.state))
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.FATAL, timeout=90, what="FATAL")
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert sup.restarts == 2 and sup.backoff_history == [0.1, 0.2]  # 3 starts, then refused
    assert sup.exit_code not in (None, 0)
    assert "start limit hit: 3 starts within 60 s" in sup.fatal_reason
    assert f"exit code {sup.exit_code}" in sup.fatal_reason
    assert 0 < len(sup.fatal_tail) <= 50 and any("Traceback" in ln for ln in sup.fatal_tail)
    # it may serve briefly before the crash, and fail a health check while it dies
    states = [s for s in states if s not in (RunState.READY, RunState.UNHEALTHY)]
    seq = [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]
    assert seq == [
        RunState.STARTING,
        RunState.CRASHED,
        RunState.STARTING,
        RunState.CRASHED,
        RunState.STARTING,
        RunState.CRASHED,
        RunState.FATAL,
    ], seq
    last = sup.record
    assert identity.run_processes(last.identity()) == []  # no orphans
    logs = sorted(Path(rec.log_path).parent.glob("*.log"))
    assert len(logs) == 3  # each start its own log
    # the FATAL record is kept until someone acts: every reader sees the reason (a read-only
    # `status` deleted it, and the second one said "stopped" with the reason and tail gone)
    for _ in range(2):
        later = Supervisor(profile)
        assert later.adopt() is None and later.state == RunState.FATAL and later.fatal_reason == sup.fatal_reason
        assert later.restarts == sup.restarts > 0 and later.exit_code == sup.exit_code
        assert runs.load_record("f") is not None
    # launch acts: the FATAL record never blocks the next start, and is replaced
    again = Supervisor(profile)
    rec2 = await again.launch()
    groups.add(rec2.pgid)
    assert runs.load_record("f").pid == rec2.pid and runs.load_record("f").fatal_reason is None
    assert (await again.stop()).ok
    assert runs.load_record("f") is None  # stop acted: the record goes


async def test_stop_during_backoff_cancels_the_restart(make_profile, groups):
    profile = load_profile(make_profile("s", tp=1, backoff=1.5))
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        os.killpg(rec.pgid, signal.SIGKILL)
        await until(lambda: sup.next_restart_at is not None, what="a pending restart")
        res = await sup.stop()
        assert res.ok and sup.state == RunState.STOPPED
        await asyncio.sleep(2.0)  # past the backoff: no restart may happen
        assert sup.state == RunState.STOPPED and runs.load_record("s") is None and sup.restarts == 0
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)


async def test_keep_logs_bounds_old_logs(make_profile, groups):
    profile = load_profile(make_profile("l", tp=1, keep_logs=2))
    sup = Supervisor(profile)
    for _ in range(3):
        rec = await sup.launch()
        groups.add(rec.pgid)
        assert (await sup.stop(grace=5)).ok
    logs = sorted(Path(rec.log_path).parent.glob("*.log"))
    assert len(logs) == 2 and Path(rec.log_path) in logs


async def test_failing_health_turns_ready_into_unhealthy_without_restart(make_profile, groups):
    path = make_profile("h", tp=1, sim_extra="health_fail_after = 20")  # ~1 s
    path.write_text(path.read_text().replace("failures = 2\n", "failures = 2\nwatchdog = false\n"))
    profile = load_profile(path)
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        await until(lambda: sup.state == RunState.UNHEALTHY, what="unhealthy")
        await asyncio.sleep(1.0)  # several more failed checks: the watchdog is off
        assert sup.state == RunState.UNHEALTHY and "HTTP 503" in sup.health_error
        assert sup.restarts == 0 and sup.record.pid == rec.pid
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert (await sup.stop()).ok


async def test_corrupt_record_is_moved_aside_and_never_blocks_launch(make_profile, groups, state_dir):
    profile = load_profile(make_profile("z", tp=1))
    runs.record_path("z").write_text('{"pid": "garbage"')
    sup = Supervisor(profile)
    assert sup.adopt() is None and "unreadable run record moved aside" in sup.last_error
    assert (state_dir / "runs" / "z.json.bad").exists()
    rec = await sup.launch()
    groups.add(rec.pgid)
    assert runs.load_record("z") == rec
    assert (await sup.stop()).ok


async def test_stop_from_another_process_during_backoff_wins(make_profile, groups):
    profile = load_profile(make_profile("o", tp=1, backoff=1.0))
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        os.killpg(rec.pgid, signal.SIGKILL)
        await until(lambda: sup.next_restart_at is not None, what="a pending restart")
        other = Supervisor(profile)  # e.g. `specconsole stop` in another terminal
        assert other.adopt() is None and other.state == RunState.CRASHED  # a restart is pending: kept
        assert runs.load_record("o") is not None
        assert (await other.stop()).ok and runs.load_record("o") is None
        await until(lambda: sup.state == RunState.STOPPED, timeout=30, what="stopped after the backoff")
        assert runs.load_record("o") is None and sup.restarts == 0
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
