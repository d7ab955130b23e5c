"""The crash cause stays (issue 23 item 5): after a `kill -9` the reason showed for ~1 s and
then only "restarts 1" remained. Now the header keeps the last exit (code, signal, when)
after the restart, and the log view holds the crash and the restart as the console's own
lines. Real Session and supervisor over a real simulator, the real app under Pilot."""

from __future__ import annotations

import os
import signal

from console.app import SpecConsoleApp
from server_control.config.profile import load_profile
from server_control.session.session import Session
from server_control.state import runs
from tests.console.screen_text import screen_text, wait_for
from tests.runs.conftest import groups, make_profile, state_dir  # noqa: F401 (fixtures)


async def test_the_last_exit_stays_in_the_header_and_the_log(make_profile, groups, state_dir):
    path = make_profile("lx", tp=1)
    session = Session.for_profile(load_profile(path), state_dir=state_dir, poll_interval_s=0.25)
    app = SpecConsoleApp(session, launch="auto")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "READY" in screen_text(app), timeout=60, what="READY")
        rec = runs.load_record("lx")
        groups.add(rec.pgid)
        os.kill(rec.pid, signal.SIGKILL)  # a crash
        await wait_for(
            pilot,
            lambda: "restarts 1" in screen_text(app) and "READY" in screen_text(app),
            timeout=60,
            what="restarted and READY",
        )
        groups.add(runs.load_record("lx").pgid)
        await pilot.pause(2.0)  # before: the reason was gone by now
        second = screen_text(app).splitlines()[1]
        assert "last exit -9 SIGKILL" in second and f"(pid {rec.pid})" in second, second
        assert len(second.rstrip()) <= 120
        lines = [r.raw for r in session.store.since(0) if r.kind == "console"]
        assert any(f"the server exited: pid {rec.pid} exit code -9, killed by signal 9" in x for x in lines), lines
        assert any("restarted (restart 1)" in x for x in lines), lines
        await pilot.press("q", "s")
        await wait_for(pilot, lambda: app.return_code is not None, timeout=30, what="exit")
