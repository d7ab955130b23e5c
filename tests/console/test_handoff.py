"""Leaving the console with the server running hands supervision to a detached
`specconsole supervise` (its own session, named in the run record and by `status`): a
crash after the console left is restarted, and `status` says "crashed (exit -9 ...)"
until then; the next console takes supervision back and the supervise leaves.

No step depends on how fast this machine is: while `status` is asked about the crash the
handed-off supervise is SIGSTOPped (it cannot restart the run in between), and every wait
is for a condition, with a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import psutil

from console.app import SpecConsoleApp
from console.handoff import hand_off
from server_control.config.profile import load_profile
from server_control.session.session import Session
from server_control.state import runs
from tests.console.screen_text import screen_text, wait_for
from tests.runs.conftest import groups, make_profile, state_dir  # noqa: F401 (fixtures)
from tests.support.cli import cli
from tests.support.wait import wait_for as wait_until


def status(path) -> dict:
    return json.loads(cli("status", "--profile", str(path), "--json").stdout)["run"]


async def test_quit_hands_supervision_over_and_the_next_console_takes_it_back(make_profile, groups, state_dir):
    path = make_profile("ho", tp=1)
    profile = load_profile(path)
    session = Session.for_profile(profile, state_dir=state_dir, poll_interval_s=0.25)
    app = SpecConsoleApp(session, launch="auto")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "READY" in screen_text(app), timeout=60, what="READY")
        await pilot.press("q", "enter")  # leave it running
        await wait_for(pilot, lambda: app.return_code is not None, what="exit")
    rec = runs.load_record("ho")
    groups.add(rec.pgid)
    handed = hand_off(session, ["--profile", str(path), "--state-dir", str(state_dir)])
    assert handed is not None
    groups.add(handed.pid)
    assert os.getsid(handed.pid) == handed.pid != os.getsid(0)  # its own session
    sup_info = wait_until(lambda: (runs.load_record("ho") or rec).supervisor, what="the supervise in the record")
    assert sup_info["pid"] == handed.pid and sup_info["kind"] == "handoff"
    assert status(path)["supervisor"]["pid"] == handed.pid

    os.kill(handed.pid, signal.SIGSTOP)  # the crash stays unrestarted while `status` is asked
    try:
        os.killpg(rec.pgid, signal.SIGKILL)  # a crash after the console left
        crashed = wait_until(
            lambda: (lambda r: r if r["state"] == "crashed" and r["exit_code"] is not None else None)(
                status(path)
            ),  # the keeper writes the exit code
            timeout=60,
            what="status: crashed, with the exit code",
        )
        assert crashed["exit_code"] == -9 and crashed["supervisor"]["pid"] == handed.pid, crashed
        text = cli("status", "--profile", str(path)).stdout
        assert "run: crashed (exit -9, signal 9)" in text and "handed over by a console" in text, text
    finally:
        os.kill(handed.pid, signal.SIGCONT)
    new = wait_until(
        lambda: (lambda r: r if r and r.pid != rec.pid and r.is_live() else None)(runs.load_record("ho")),
        timeout=60,
        what="the restart by the handed-off supervise",
    )
    groups.add(new.pgid)
    assert new.restarts == 1

    session2 = Session.for_profile(profile, state_dir=state_dir, poll_interval_s=0.25)
    app2 = SpecConsoleApp(session2, launch="auto")
    async with app2.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: session2.run.sup.supervising, timeout=60, what="the console supervising again")
        await wait_for(
            pilot,
            lambda: not psutil.pid_exists(handed.pid) or psutil.Process(handed.pid).status() == "zombie",
            timeout=60,
            what="the handed-off supervise gone",
        )
        await wait_for(
            pilot,
            lambda: (runs.load_record("ho").supervisor or {}).get("kind") == "console",
            what="the console named in the record",
        )
        assert (await asyncio.to_thread(status, path))["supervisor"]["kind"] == "console"
        await pilot.press("q", "s")  # stop
        await wait_for(pilot, lambda: app2.return_code is not None, timeout=60, what="exit")
    assert hand_off(session2, ["--profile", str(path)]) is None  # stopped: nothing to hand over
    assert "detached; server left running" in handed.log_path.read_text()
    deadline = time.monotonic() + 30
    while new.is_live() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not new.is_live()
