"""Headless `restart` keeps what was changed at runtime (issue 23 item 4): N=7 set with
`specconsole threshold` came back as the profile's 5 after `specconsole restart`, with no
re-apply in the journal, while the console's `r` kept it. Real CLI processes, a real
simulator run (its group killed at teardown by the run fixtures)."""

from __future__ import annotations

import json

from server_control.state import journal
from tests.support.cli import cli
from tests.support.wait import wait_for


def test_restart_reapplies_the_runtime_threshold(make_profile, groups, state_dir):
    path = make_profile("rk", tp=2)
    r = cli("launch", "--profile", str(path), "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("threshold", "7", "--profile", str(path))
    assert r.returncode == 0 and r.stdout.startswith("applied"), r.stdout + r.stderr
    r = cli("restart", "--profile", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    # the run's own supervisor re-applies them (the restart says so)
    assert "it re-applies the runtime settings once ready: threshold 7 (profile 5)" in r.stdout, r.stdout
    snap = wait_for(
        lambda: (lambda j: j if j["spec"]["threshold"] == 7 else None)(
            json.loads(cli("status", "--profile", str(path), "--json").stdout)
        ),
        timeout=60,
        what="threshold 7 re-applied",
    )  # before: 5, the profile's
    assert snap["run"]["runtime"] == {"speculative_disable_batch_threshold": 7}
    reapplied = [e for e in journal.read(state_dir) if e.action == "reapply"]
    assert reapplied and reapplied[-1].new == 7 and reapplied[-1].result == "applied"
    assert "runtime settings ended with the run" not in r.stdout  # a restart keeps them
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_stop_says_the_runtime_settings_end_with_the_run(make_profile, groups, state_dir):
    """Issue 35: stop then launch dropped N set at runtime without a word (restart keeps it)."""
    path = make_profile("rs", tp=1)
    assert cli("launch", "--profile", str(path), "--wait", "60").returncode == 0
    assert cli("threshold", "7", "--profile", str(path)).returncode == 0
    r = cli("stop", "--profile", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runtime settings ended with the run: threshold 7 (profile 5) (the next launch runs the profile's" in r.stdout
    r = cli("launch", "--profile", str(path), "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    snap = json.loads(cli("status", "--profile", str(path), "--json").stdout)
    assert snap["spec"]["threshold"] == 5 and snap["run"]["runtime"] == {}, snap["run"]
    r = cli("stop", "--profile", str(path))
    assert r.returncode == 0 and "runtime settings ended" not in r.stdout, r.stdout  # nothing set: nothing said


async def test_the_console_forgets_a_change_of_the_run_it_stopped(make_profile, groups, state_dir):
    """The console's last change ("threshold 7 applied") outlived the stop and labelled the
    next launch's profile value "applied"; the stop ends it, and its message says why."""
    from server_control.config.profile import load_profile  # noqa: PLC0415
    from server_control.model.vocabulary import ChangeState  # noqa: PLC0415
    from server_control.session.session import Session  # noqa: PLC0415
    from tests.support.wait import until  # noqa: PLC0415

    session = Session.for_profile(load_profile(make_profile("rc", tp=1)), state_dir=state_dir, poll_interval_s=0.25)
    await session.start()
    try:
        assert (await session.launch()).done
        await until(lambda: session.snapshot().server.reachable, 30, "the server answering")
        got = await session.set_threshold(7)
        assert got.change is not None and got.change.state == ChangeState.APPLIED, got
        res = await session.stop()
        assert res.done and "runtime settings ended with the run: threshold 7 (profile 5)" in res.message, res.message
        assert session.snapshot().last_change is None
    finally:
        await session.stop()
        await session.close()
