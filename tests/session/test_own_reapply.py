"""The run's own re-apply is not "changed elsewhere" (issue 23 item 4): N=7 set by a
headless `threshold`, then a restart from this console: its supervisor re-applies 7 once the
new server is ready, and the status line said "N changed elsewhere: 5 -> 7, by <this
console's pid>". Now: "applied" (re-applied after the restart). Real simulator, real CLI."""

from __future__ import annotations

import asyncio

import pytest

from server_control.config.profile import load_profile
from server_control.session.session import Session
from tests.support import command_forkserver
from tests.support.wait import until


@pytest.mark.parametrize("poll_s", [0.2, 2.5])
async def test_a_reapply_after_restart_is_the_runs_own(sim_profile, poll_s):
    """Polls 2.5 s apart (a loaded machine: a CI run failed so with 0.2) never see the new
    server's launch value, or even the restart: the label must come all the same."""
    profile = load_profile(sim_profile)
    session = Session.for_profile(profile, poll_interval_s=poll_s)
    await session.start()
    try:
        assert (await session.launch()).done
        await until(lambda: session.snapshot().run.state == "ready" and session.snapshot().server.reachable, what="ready")
        r = await asyncio.to_thread(command_forkserver.run, ["threshold", "7", "--profile", str(sim_profile)], timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        await until(lambda: session.snapshot().spec.threshold == 7, what="N=7 seen")
        assert (await session.restart()).done
        await until(lambda: session.snapshot().run.state == "ready", what="ready again")
        # the headless change's own label (requested 7, "elsewhere") is still there right after
        # the restart: wait for the re-apply's, then check that nothing relabels it
        await until(
            lambda: (
                session.snapshot().spec.threshold == 7
                and session.last_change is not None
                and "re-applied after the restart" in session.last_change.detail
            ),
            what="7 re-applied and seen",
            timeout=60,
        )
        await asyncio.sleep(1.0)
        change = session.snapshot().last_change
        assert change is not None and change.state == "applied", change  # before: "elsewhere", by our pid
        assert "re-applied after the restart" in change.detail
    finally:
        await session.close()
