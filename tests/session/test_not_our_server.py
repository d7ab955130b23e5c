"""Only our own server (issue 23 item 1): after this run's server stopped, another process
(a simulator of another install) takes the port. The session must not show, steer or
credit that server: "not this run's server", steering refused, nothing of it in the panels.
And while our run is live and is the one answering, nothing changes.

Real processes: the profile's simulator launched through the supervisor, a foreign
simulator started on the same port afterwards (stopped by its process group)."""

from __future__ import annotations

import httpx

from server_control.config.profile import load_profile
from server_control.session.session import Session
from tests.support.sim import start_sim
from tests.support.wait import until


async def test_a_stranger_on_our_port_is_not_shown_or_steered(sim_profile, tmp_path):
    profile = load_profile(sim_profile)
    session = Session.for_profile(profile, poll_interval_s=0.2)
    await session.start()
    stranger = None
    try:
        assert (await session.launch()).done
        await until(lambda: session.snapshot().run.state == "ready", what="ready")
        await until(lambda: session.snapshot().server.reachable, what="our server polled")
        snap = session.snapshot()
        assert not snap.server.foreign and snap.server.reachable  # ours: as before
        assert (await session.stop()).done
        (tmp_path / "other").mkdir()
        stranger = start_sim(tmp_path / "other", port=profile.port)  # another install takes the port
        await until(lambda: session.snapshot().server.foreign, what="the stranger seen as not ours", timeout=20)
        snap = session.snapshot()
        assert not snap.server.reachable and "not this run's server" in (snap.server.error or "")
        assert f"port {profile.port}" in snap.server.error
        before = httpx.get(f"{stranger.url}/server_info", timeout=5).json()
        result = await session.set_threshold(7)
        assert result.outcome == "refused" and "not this run's server" in result.message
        after = httpx.get(f"{stranger.url}/server_info", timeout=5).json()
        key = "speculative_disable_batch_threshold"
        assert after.get(key) == before.get(key)  # nothing was sent to it
        marks = [r.raw for r in session.store.since(0) if r.kind == "console"]
        assert any("not this run's server" in m for m in marks)
        assert not any("answers again" in m for m in marks)  # before: "the server answers again"
    finally:
        await session.close()
        if stranger is not None:
            stranger.stop()
