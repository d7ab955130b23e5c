"""A profile session records its server in the profile's history (server_control/state/history.py)
through a restart, and a new session on the same profile starts with that record: real
simulator processes launched by the supervisor, a real state dir."""

from __future__ import annotations

import os
import stat
import time

from server_control.config.profile import load_profile
from server_control.model.run_status import RunStatus
from server_control.session.history_keeper import point_of
from server_control.session.session import Session
from server_control.state.history import history_path, read_history
from server_control.state.state_dir import resolve_state_dir
from server_control.telemetry.sample import Sample
from tests.support.wait import until


async def test_the_history_survives_a_restart_of_the_server_and_of_the_session(sim_profile):
    profile = load_profile(sim_profile)
    session = Session.for_profile(profile, poll_interval_s=0.2)
    await session.start()
    try:
        assert (await session.launch()).done
        await until(lambda: any(p.up and p.batch for p in session.history().points), what="a busy poll recorded")
        assert (await session.restart()).done
        runs = lambda: {p.run for p in session.history().points if p.up}  # noqa: E731
        await until(lambda: len(runs()) == 2, what="polls of the second run recorded")
        await session.stop()
    finally:
        await session.close()
    path = history_path(resolve_state_dir(), profile.name)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    points, bad = read_history(path)
    assert bad == 0 and len({p.run for p in points if p.up}) == 2
    assert any(not p.up for p in points), "the restart's gap and the stop are recorded as outages"
    again = Session.for_profile(profile, poll_interval_s=0.2)
    recorded = again.history()
    assert [p.ts for p in recorded.points] == [p.ts for p in points], "a new session starts with the record"
    assert recorded.until == points[-1].ts


def test_a_restart_within_the_same_second_is_another_run() -> None:
    """A run's start time has whole seconds only: a restart in the second of the start it
    replaces (a fresh-clone CI run saw it) must still be a new run in the history."""
    sample = Sample(ts=1.0, reachable=False)
    first = point_of(sample, RunStatus(pid=100, started_at="2026-12-02T07:30:00+00:00"))
    again = point_of(sample, RunStatus(pid=101, started_at="2026-12-02T07:30:00+00:00"))
    assert first.run != again.run
    assert point_of(sample, RunStatus(pid=100, started_at="2026-12-02T07:30:00+00:00")).run == first.run


def test_unreadable_lines_and_a_failed_write_are_said_in_the_log_view(sim_profile, tmp_path):
    profile = load_profile(sim_profile)
    path = history_path(resolve_state_dir(), profile.name)
    path.parent.mkdir(mode=0o700)
    now = time.time()
    path.write_text(f'{{"ts": {now - 10}, "b": 2}}\nnot json\n{{"ts": null}}\n')
    session = Session.for_profile(profile, poll_interval_s=0.2)
    said = [r.text for r in session.store.records()]
    assert any(f"history {path}: 2 unreadable line(s) skipped" in t for t in said), said
    assert [p.batch for p in session.history().points] == [2.0]
    os.chmod(path.parent, 0o777)  # now others could write there: refused, and said once
    keeper = session._history
    keeper.history._written_at -= 3600
    from server_control.telemetry.sample import Sample

    for i in range(3):
        keeper.observe(Sample(ts=now + i, reachable=False), session.run.status(), False)
        keeper.history._written_at -= 3600
    said = [r.text for r in session.store.records() if "history not saved" in r.text]
    assert len(said) == 1 and "world-writable" in said[0], said
    os.chmod(path.parent, 0o700)


def test_a_headless_command_keeps_no_history_on_disk(tmp_path):
    """Only a session that supervises (the console) writes the profile's history file; a
    headless command (`status`, `verify`: supervise=False) reads and writes no state."""
    from server_control.config.assets import profile_path
    from server_control.config.profile import load_profile
    from server_control.session.run_backends import ProfileRun

    profile = load_profile(profile_path("demo"))
    assert ProfileRun(profile, tmp_path, supervise=False).history_dir() is None
    assert ProfileRun(profile, tmp_path, supervise=True).history_dir() == ProfileRun(profile, tmp_path).sup.state_dir
