"""A setting changed at runtime survives a restart: after a crash restart (and a restart
from the console) the supervisor re-applies N / forced mode once the new server is ready
and says so; with [restart] reapply_runtime = false it says the server is back on the
profile's values instead of staying silent."""

from __future__ import annotations

import asyncio
import os
import signal

from server_control.config.profile import load_profile
from server_control.control.settings import Control
from server_control.model.vocabulary import RunState
from server_control.state import runs
from server_control.supervision.supervisor import Supervisor
from tests.support.cli import cli
from tests.support.supervised import launched_and_watched
from tests.support.wait import until


async def thresholds(url: str) -> list:
    c = Control(url)
    try:
        got = await c.get()
    finally:
        await c.aclose()
    return got.get("thresholds", []) + got.get("force", [])


async def settled(url: str, want: list, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while (got := await thresholds(url)) != want:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: server reads {got}, expected {want}")
        await asyncio.sleep(0.1)


async def crash_and_restart(sup: Supervisor, groups) -> None:
    rec = sup.record
    os.killpg(rec.pgid, signal.SIGKILL)
    await until(lambda: sup.record is not None and sup.record.pid != rec.pid, what="restart")
    groups.add(sup.record.pgid)
    await until(lambda: sup.state == RunState.READY, what="ready again")


async def test_runtime_settings_are_reapplied_after_a_crash_and_a_console_restart(make_profile, groups):
    path = make_profile("ra", tp=2, backoff=0.2)
    sup = Supervisor(load_profile(path))
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        for args in (("threshold", "8"), ("threshold", "--force", "target_only")):  # another terminal
            r = await asyncio.to_thread(cli, *args, "--profile", str(path))
            assert r.returncode == 0, r.stdout + r.stderr
        assert runs.load_record("ra").runtime == {
            "speculative_disable_batch_threshold": 8,
            "speculative_disable_force_mode": "target_only",
        }
        await crash_and_restart(sup, groups)
        await settled(sup.profile.url, [8, "target_only"], "after the crash restart")
        # the note is written once the re-apply has read both values back: a poll can see them first
        await until(lambda: sup.runtime_note is not None, what="the re-apply's note")
        assert sup.runtime_note == (
            "re-applied runtime settings after the restart: threshold 8 (profile 5), force_mode target_only (profile auto)"
        )
        assert sup.status_json()["runtime_note"] == sup.runtime_note
        assert not runs.load_record("ra").runtime_pending
        await sup.restart()  # the console's restart
        groups.add(sup.record.pgid)
        try:
            await until(lambda: sup.state == RunState.READY, what="ready after restart")
        except AssertionError as exc:  # hung once in a fresh clone (2026-12-05): say where the run stood
            stood = f"state {sup.state}, last_error {sup.last_error!r}, record {sup.record}, on disk {sup.load_disk()}"
            raise AssertionError(f"{exc}; {stood}") from None
        await settled(sup.profile.url, [8, "target_only"], "after a restart from the console")
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert (await sup.stop()).ok


async def test_reapply_off_says_the_profile_values_are_back(make_profile, groups):
    path = make_profile("rn", tp=1, backoff=0.2)
    path.write_text(path.read_text().replace("keep_logs =", "reapply_runtime = false\nkeep_logs ="))
    sup = Supervisor(load_profile(path))
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    try:
        await until(lambda: sup.state == RunState.READY, what="ready")
        r = await asyncio.to_thread(cli, "threshold", "8", "--profile", str(path))
        assert r.returncode == 0, r.stdout + r.stderr
        await crash_and_restart(sup, groups)
        await settled(sup.profile.url, [5, "auto"], "with reapply_runtime = false")
        assert "NOT re-applied" in sup.runtime_note and "instead of threshold 8 (profile 5)" in sup.runtime_note
        assert runs.load_record("rn").runtime == {}
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert (await sup.stop()).ok


def test_supervise_and_the_log_view_say_the_settings_were_reapplied(make_profile, groups, state_dir):
    from tests.support.cli import read_until, start_cli

    path = make_profile("rs", tp=1, backoff=0.2)
    sup = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(sup, "rs: ready")
    rec = runs.load_record("rs")
    groups.add(rec.pgid)
    assert cli("threshold", "9", "--profile", str(path)).returncode == 0
    os.killpg(rec.pgid, signal.SIGKILL)
    seen = read_until(sup, "re-applied runtime settings after the restart: threshold 9 (profile 5)")
    assert any("restarts 1" in line for line in seen), seen
    sup.send_signal(signal.SIGINT)
    sup.communicate(timeout=30)
    groups.add(runs.load_record("rs").pgid)
    assert cli("stop", "--profile", str(path)).returncode == 0


async def test_the_console_log_view_says_the_settings_were_reapplied(make_profile, groups, state_dir):
    from server_control.session.session import Session

    path = make_profile("rv", tp=1, backoff=0.2)
    session = Session.for_profile(load_profile(path), poll_interval_s=0.25)
    await session.start()
    try:
        assert (await session.launch()).done
        sup = session.run.sup
        groups.add(sup.record.pgid)
        await until(lambda: sup.state == RunState.READY, what="ready")
        assert (await session.set_threshold(7)).done
        await crash_and_restart(sup, groups)
        await until(
            lambda: any(
                "re-applied runtime settings after the restart: threshold 7 (profile 5)" in r.raw for r in session.store.records()
            ),
            what="the note in the log view",
        )
    finally:
        await session.close(stop_server=True)


async def test_a_restarts_stop_read_late_is_not_a_crash_of_the_new_server(make_profile, groups, monkeypatch):
    """The watch reads a dead server's exit code in a thread; a restart from the console can
    stop the old server and launch the new one meanwhile. That late exit was charged to the
    new server (`server pid NEW exited`, a crash and a backoff restart of a live server): the
    restart above never became ready once in a fresh clone. Slowing the read makes the race
    certain: the exit read across a stop/launch is the old server's and is dropped."""
    from server_control.supervision import health_watch

    real = health_watch.process.exit_status

    def slow(*args, **kwargs):
        import time

        time.sleep(3.0)  # the thread's read outlives the restart's stop and launch
        return real(*args, **kwargs)

    sup, watch = await launched_and_watched(make_profile("rl", tp=1, backoff=0.2), groups)
    try:
        monkeypatch.setattr(health_watch.process, "exit_status", slow)
        await sup.restart()
        groups.add(sup.record.pgid)
        new_pid = sup.record.pid
        await until(lambda: sup.state == RunState.READY, what="ready after restart")
        await asyncio.sleep(4.0)  # past the slow read
        assert not watch.done(), watch
        assert sup.state == RunState.READY and sup.record.pid == new_pid, (sup.state, sup.last_error)
        assert sup.last_error is None and sup.restarts == 0, sup.last_error
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    assert (await sup.stop()).ok
