"""A step of the wall clock (NTP, a VM resumed) does not make a live run look gone.

psutil's epoch ``create_time()`` is the start ticks since boot / CLK_TCK plus the boot time
of /proc/stat (``btime`` = the wall clock now minus the uptime), so every step of the wall
clock moves it by whole seconds. The step is simulated by shifting what psutil answers for
``Process.create_time`` and ``boot_time`` (stepping this machine's real clock would disturb
everything else on it); /proc's start ticks and the boot id stay what they are, as they do.
"""

from __future__ import annotations

import json
import os
import signal

import psutil

from server_control.config.profile import load_profile
from server_control.host import identity
from server_control.model.vocabulary import RunState
from server_control.state import restart_lock, runs
from server_control.supervision.supervisor import Supervisor
from tests.support.clock import step_wall_clock
from tests.support.procs import alive
from tests.support.wait import until, wait_for

STEPS_S = (1.0, -1.0, 3600.0)


async def launch_with_ranks(name: str, make_profile, groups):
    """A simulator with two TP ranks, launched, its ranks recorded as the run's members."""
    profile = load_profile(make_profile(name, tp=2))
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    await until(lambda: len(sup.processes()) >= 3, what="leader and two TP ranks")
    await until(lambda: len(runs.load_record(name).members) >= 2, what="the ranks recorded as members")
    return profile, rec


async def test_a_live_run_and_its_orphans_are_still_known_after_the_clock_steps(make_profile, groups, state_dir, monkeypatch):
    profile, rec = await launch_with_ranks("c", make_profile, groups)
    before = {p.pid for p in identity.run_processes(rec.identity())}
    for step in STEPS_S:
        step_wall_clock(monkeypatch, step)
        disk = runs.load_record("c")
        assert disk.is_live(), f"a {step:+g} s step of the wall clock: the live run taken for gone"
        assert before <= {p.pid for p in identity.run_processes(disk.identity())}, f"{step:+g} s"
        other = Supervisor(profile)  # another console, `stop`, `supervise`
        assert other.adopt() is not None and other.state != RunState.CRASHED, (step, other.last_error)

    # the leader dies; its ranks are known only by their recorded (pid, start) pairs
    os.kill(rec.pid, signal.SIGKILL)
    wait_for(lambda: not alive([rec.pid]), what="the leader gone")
    ranks = {p.pid for p in identity.run_processes(runs.load_record("c").identity())}
    assert ranks and rec.pid not in ranks and ranks <= before
    # Every orphan must be found and signalled by the stop. A process of the run may end by
    # itself once its leader is gone (twice in fresh clones one of the three exited between
    # a read of them and the stop's own census; which and why is not established: the
    # simulator's ranks idle until signalled), so they are frozen before the stop: a stopped
    # process cannot exit on its own, and the stop sends SIGCONT with its SIGTERM.
    names = {}
    for pid in ranks:
        try:
            names[pid] = " ".join(psutil.Process(pid).cmdline())[:100]
            os.kill(pid, signal.SIGSTOP)
        except (ProcessLookupError, psutil.Error):
            pass
    still = set(alive(ranks))
    res = await Supervisor(profile).stop()
    assert res.ok and res.was_running and still and still <= set(res.signalled), (res.message, names, still)
    assert alive(ranks) == []


async def test_an_earlier_versions_record_is_adopted_and_given_its_clock_free_start(make_profile, groups, state_dir, monkeypatch):
    profile, _ = await launch_with_ranks("old", make_profile, groups)
    path = runs.record_path("old")
    data = json.loads(path.read_text())
    for key in ("boot_id", "start_ticks"):  # as the previous version wrote it
        data.pop(key, None)
    data["members"] = [m[:2] for m in data["members"]]
    path.write_text(json.dumps(data))

    step_wall_clock(monkeypatch, 1.0)  # within the tolerance kept for old records
    assert runs.load_record("old").is_live()
    other = Supervisor(profile)
    assert other.adopt() is not None and len(other.processes()) >= 3
    upgraded = json.loads(path.read_text())
    assert isinstance(upgraded.get("start_ticks"), int) and upgraded.get("boot_id"), upgraded
    assert len(upgraded["members"]) >= 2 and all(len(m) == 3 and isinstance(m[2], int) for m in upgraded["members"]), upgraded
    step_wall_clock(monkeypatch, 3600.0)  # from now on no step matters
    assert runs.load_record("old").is_live()


async def test_the_supervisor_is_known_after_the_clock_steps(make_profile, state_dir, monkeypatch):
    profile = load_profile(make_profile("s", tp=1))
    me = psutil.Process()
    sup = Supervisor(profile, role="supervise")
    runs.save_record(
        runs.RunRecord(
            name="s",
            profile_path=None,
            kind="sim",
            pid=me.pid,
            create_time=me.create_time(),
            pgid=os.getpgid(0),
            sid=os.getsid(0),
            argv=me.cmdline(),
            host="127.0.0.1",
            port=profile.port,
            log_path="/nonexistent.log",
            cwd="/",
            started_at="2026-01-01T00:00:00+00:00",
            supervisor=sup.ownership.info(),
        )
    )
    lock = restart_lock.RestartLock.acquire("s")
    assert lock is not None
    try:
        for step in STEPS_S:
            step_wall_clock(monkeypatch, step)
            who = Supervisor(profile).supervisor_of()
            assert who is not None and who.pid == me.pid and who.kind == "supervise", f"{step:+g} s"
    finally:
        lock.release()
