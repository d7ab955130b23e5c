"""Session over a profile: launch through the supervisor, all layers pass, stop leaves no
process of the run."""

from __future__ import annotations

import psutil

from server_control.config.profile import load_profile
from server_control.session.session import Session
from tests.support.wait import until


async def test_profile_session_launch_verify_stop(sim_profile):
    profile = load_profile(sim_profile)
    session = Session.for_profile(profile, poll_interval_s=0.2)
    await session.start()
    try:
        assert session.snapshot().to_json()["run"]["state"] == "stopped"
        launched = await session.launch()
        assert launched.done and launched.run.state in ("starting", "ready"), launched
        await until(lambda: session.snapshot().to_json()["run"]["state"] == "ready", what="ready")
        await until(lambda: session.verification().to_json()["summary"] == "pass", what="verification to pass")
        snap = session.snapshot().to_json()
        assert snap["profile"] == profile.name and snap["attached"] is False
        assert snap["logs"]["path"] == snap["run"]["log_path"]
        cfg = snap["verify"]["layers"][0]
        assert cfg["status"] == "pass" and "speculative_disable_batch_threshold=5" in cfg["evidence"]
        # a restart: a new log file is followed, verification starts again and passes again
        first_log = snap["logs"]["path"]
        restarted = await session.restart()
        assert restarted.done, restarted
        await until(lambda: session.snapshot().to_json()["logs"]["path"] not in (None, first_log), what="new log followed")
        await until(lambda: session.verification().to_json()["summary"] == "pass", what="pass after restart")
        snap = session.snapshot().to_json()
        assert snap["logs"]["path"] == snap["run"]["log_path"] != first_log
        pids = snap["run"]["processes"]
        assert snap["run"]["pid"] in pids
        stopped = await session.stop()
        assert stopped.done and stopped.outcome == "done", stopped
        assert session.snapshot().to_json()["run"]["state"] == "stopped"
        assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    finally:
        await session.close()


async def test_attached_session_refuses_launch():
    session = Session.attach("http://127.0.0.1:9")
    assert (await session.launch()).outcome == "refused"
    assert "attached" in (await session.stop()).message
