"""Supervision never lives in the console (issue 34): a run the console launches starts under
its own detached `specconsole supervise` (its own session, named in the run record from the
record's first write); the console is its client and never takes the restart lock; `q`
asks only whether to stop the server too; after the console left, a crash is restarted with
the runtime N re-applied; a console that finds the run's supervisor killed starts a new one
and says so; `q` then Stop stops the server and the supervisor ends.

Real: the simulator, the detached supervisors (real processes in their own sessions, stopped
by their groups at teardown: tests/runs/conftest.py), the console under Pilot. Every wait is
for a condition, with a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import psutil

from console.app import SpecConsoleApp
from console.cli.ui import console_session
from console.dialogs.confirm import ChoiceScreen
from server_control.config.profile import load_profile
from server_control.control.settings import Control
from server_control.model.vocabulary import Outcome
from server_control.session.run_backends import SUPERVISOR_START_WAIT_S
from server_control.state import runs
from tests.console.screen_text import screen_text, wait_for
from tests.runs.conftest import groups, make_profile, state_dir  # noqa: F401 (fixtures)
from tests.support.cli import cli
from tests.support.wait import wait_for as wait_until


def live_record(name: str, other_than: int | None = None) -> runs.RunRecord | None:
    rec = runs.load_record(name)
    return rec if rec is not None and rec.is_live() and rec.pid != other_than else None


def supervisor_log(state_dir, name: str) -> str:
    return "".join(p.read_text() for p in sorted((state_dir / "logs" / name).glob("supervise-*.log")))


def supervisors_of(path) -> list[int]:
    """The live `supervise` processes of the profile ``path``."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        try:
            if "supervise" in cmd and str(path) in cmd and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            pass
    return sorted(out)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def threshold_of(url: str) -> object:
    c = Control(url)
    try:
        return (await c.get()).get("thresholds")
    finally:
        await c.aclose()


async def test_the_run_has_its_own_supervisor_and_the_console_is_its_client(make_profile, groups, state_dir):
    path = make_profile("rs", tp=1)
    profile = load_profile(path)
    session = console_session(profile, state_dir)
    app = SpecConsoleApp(session, launch="auto")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "READY" in screen_text(app), timeout=60, what="READY")
        rec = runs.load_record("rs")
        groups.add(rec.pgid)
        who = rec.supervisor
        assert who is not None and who["kind"] == "run" and who["pid"] != os.getpid(), who
        sup_pid = who["pid"]
        groups.add(sup_pid)
        assert os.getsid(sup_pid) == sup_pid != os.getsid(0)  # its own session: no terminal of ours
        launched = [json.loads(x) for x in supervisor_log(state_dir, "rs").splitlines() if x.startswith('{"event": "launched"')]
        assert launched and launched[0]["supervising"], launched  # it held the lock when it launched: the record named it
        assert not session.run.sup.supervising  # the console never holds the restart lock
        assert (await session.set_threshold(8)).outcome == Outcome.DONE
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)
        question = screen_text(app)
        assert "Stop the server too?" in question and f"(pid {sup_pid}) restarts a crash" in question, question
        await pilot.press("enter")  # leave it running
        await wait_for(pilot, lambda: app.return_code is not None, what="exit")
    assert "left running" in app.farewell and f"(pid {sup_pid}) restarts a crash" in app.farewell, app.farewell

    # the console is gone; its run's supervisor is not
    assert not gone(sup_pid)
    os.killpg(rec.pgid, signal.SIGKILL)
    new = wait_until(lambda: live_record("rs", other_than=rec.pid), timeout=60, what="the restart by the run's supervisor")
    groups.add(new.pgid)
    assert new.restarts == 1 and (new.supervisor or {}).get("pid") == sup_pid
    deadline = time.monotonic() + 30
    while await threshold_of(profile.url) != [8]:
        assert time.monotonic() < deadline, "the runtime N was not re-applied after the crash"
        time.sleep(0.2)

    # the supervisor killed: the next console starts one and says so
    os.kill(sup_pid, signal.SIGKILL)
    wait_until(lambda: gone(sup_pid), what="the supervisor gone")
    session2 = console_session(profile, state_dir)
    app2 = SpecConsoleApp(session2, launch="auto")
    async with app2.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: session2.run.supervisor_note is not None, timeout=30, what="a supervisor started")
        note = session2.run.supervisor_note
        assert f"its supervisor (pid {sup_pid}) ended without detaching: started specconsole supervise pid" in note, note
        await wait_for(
            pilot,
            lambda: (lambda w: w is not None and w.pid != sup_pid and w.kind == "run")(session2.run.status().supervisor),
            timeout=30,
            what="the new supervisor holding the lock",
        )
        second = session2.run.status().supervisor.pid
        groups.add(second)
        assert any("ended without detaching: started" in r.text for r in session2.store.since(0) if r.kind == "console")
        assert not session2.run.sup.supervising
        assert "the run's own specconsole supervise (detached), pid" in cli("status", "--profile", str(path)).stdout

        # a restart from the console while its supervisor is slow (frozen: it cannot name
        # itself in the new record yet): the console starts no second one (the lock is
        # held); thawed, the supervisor follows the new server and re-applies N
        started_at, _ = session2.run._started_supervisor
        await pilot.pause(max(0.0, started_at + SUPERVISOR_START_WAIT_S - time.monotonic()))  # past the start's grace
        os.kill(second, signal.SIGSTOP)
        try:
            assert (await session2.restart()).outcome == Outcome.DONE
            third = wait_until(lambda: live_record("rs", other_than=new.pid), timeout=60, what="the restarted server")
            groups.add(third.pgid)
            await pilot.pause(3.0)  # several polls, each of which would start a supervisor if it thought none ran
            assert supervisors_of(path) == [second], supervisors_of(path)
        finally:
            os.kill(second, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while await threshold_of(profile.url) != [8]:
            assert time.monotonic() < deadline, "the runtime N was not re-applied after the console's restart"
            await pilot.pause(0.2)
        await wait_for(
            pilot,
            lambda: (runs.load_record("rs").supervisor or {}).get("pid") == second,
            timeout=30,
            what="the same supervisor naming itself in the new record",
        )
        assert supervisors_of(path) == [second], supervisors_of(path)
        await pilot.press("q", "s")  # stop it too
        await wait_for(pilot, lambda: app2.return_code is not None, timeout=60, what="exit")
    assert not third.is_live()
    wait_until(lambda: gone(second), timeout=10, what="the supervisor ended by the stop")


def test_a_bare_launch_gets_no_supervisor_from_a_console(make_profile, groups, state_dir):
    """`launch --no-supervise`: nobody restarts it, it says so, and a console that opens it
    starts no supervisor (the record keeps the choice)."""
    import asyncio

    path = make_profile("rb", tp=1)
    r = cli("launch", "--profile", str(path), "--no-supervise", "--json")
    rec = runs.load_record("rb")
    if rec is not None:
        groups.add(rec.pgid)
    assert r.returncode == 0, r.stdout + r.stderr
    said = json.loads(r.stdout)
    assert "nobody supervises it (--no-supervise)" in said["supervisor"], said
    assert rec.unsupervised and rec.supervisor is None

    async def open_console() -> None:
        session = console_session(load_profile(path), state_dir)
        await session.start()
        try:
            await asyncio.sleep(2.0)  # several polls: each would start one
            assert session.run.supervisor_note is None
            assert session.run.status().supervisor is None
        finally:
            await session.close()

    asyncio.run(open_console())
    assert runs.load_record("rb").supervisor is None
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_launch_starts_the_run_under_its_own_supervisor(make_profile, groups, state_dir):
    """`launch` (the default): the run's supervisor launches it; `--json` names it; a second
    launch is refused (exit 3) with the reason, and starts nothing that stays."""

    path = make_profile("rl", tp=1)
    r = cli("launch", "--profile", str(path), "--json")
    rec = runs.load_record("rl")
    if rec is not None:
        groups.add(rec.pgid)
    assert r.returncode == 0, r.stdout + r.stderr
    said = json.loads(r.stdout)
    assert said["supervisor"].startswith("launched under its own supervisor (specconsole supervise pid"), said
    who = rec.supervisor
    assert who["kind"] == "run"
    groups.add(who["pid"])
    again = cli("launch", "--profile", str(path))
    assert again.returncode == 3 and "refused:" in again.stderr and "already running" in again.stderr, again.stderr
    assert runs.load_record("rl").supervisor["pid"] == who["pid"]  # the first one still
    stop = cli("stop", "--profile", str(path))
    assert stop.returncode == 0 and f"its supervisor (pid {who['pid']}) ended" in stop.stdout, stop.stdout
    assert gone(who["pid"])  # a stop leaves nothing of the run behind


async def test_a_run_recorded_by_an_earlier_version_is_adopted_and_gets_a_supervisor(make_profile, groups, state_dir):
    """A record of the earlier layout (no ``unsupervised``; its supervisor a console that
    handed off, gone without detaching) is adopted by a console, which says whose
    supervision ended and starts the run's own."""
    path = make_profile("ro", tp=1)
    assert cli("launch", "--profile", str(path), "--no-supervise", "--wait", "60").returncode == 0
    rec = runs.load_record("ro")
    groups.add(rec.pgid)
    record_file = runs.record_path("ro", state_dir)
    old = json.loads(record_file.read_text())
    del old["unsupervised"]
    old["supervisor"] = {"pid": 999999, "create_time": 1.0, "boot_id": None, "start_ticks": None, "kind": "handoff", "since": "x"}
    record_file.write_text(json.dumps(old))
    session = console_session(load_profile(path), state_dir)
    await session.start()
    try:
        deadline = time.monotonic() + 30
        while session.run.supervisor_note is None:
            assert time.monotonic() < deadline, "no supervisor started for the adopted run"
            await asyncio.sleep(0.1)
        assert (
            "its supervisor (pid 999999) ended without detaching: started specconsole supervise pid"
            in session.run.supervisor_note
        )
        assert session.run.status().pid == rec.pid  # adopted, not relaunched
        while (who := session.run.status().supervisor) is None or who.kind != "run":
            assert time.monotonic() < deadline + 30, "the new supervisor never took the lock"
            await asyncio.sleep(0.1)
        groups.add(who.pid)
    finally:
        await session.close()
    assert cli("stop", "--profile", str(path)).returncode == 0
