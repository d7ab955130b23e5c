"""Two clients set N on one server at the same moment: exactly one is "applied" (the value
the server keeps), the other says "overridden by another client (now N=...)"; every change
and who made it lands in the operator journal; a session shows a change it did not make."""

from __future__ import annotations

import asyncio

import pytest

from server_control.session.session import Session
from server_control.state import journal

OFFSETS_S = (0.0, 0.01, 0.03, 0.06, 0.1)  # B starts this long after A: always inside A's operation


@pytest.fixture
def private_state(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    return state


async def _started(url: str) -> Session:
    s = Session.attach(url, poll_interval_s=0.25)
    await s.start()
    for _ in range(200):  # a first poll: the journal's "old" value comes from it
        if s.last is not None and s.last.reachable:
            break
        await asyncio.sleep(0.05)
    return s


async def test_concurrent_changes_give_one_applied_and_one_overridden(sim_factory, private_state):
    sim = sim_factory(tp=2, threshold=5)
    sim.wait_ready()
    a, b = await _started(sim.url), await _started(sim.url)
    tally = {"both applied": 0, "pairs": 0, "wrong final": 0}
    try:
        for i, offset in enumerate(OFFSETS_S):
            va, vb = 10 + 2 * i, 11 + 2 * i

            async def later(offset: float = offset, vb: int = vb) -> object:  # bound now (B023)
                await asyncio.sleep(offset)
                return await b.set_threshold(vb)

            ra, rb = await asyncio.gather(a.set_threshold(va), later())
            states = sorted([ra.change.state, rb.change.state])
            tally["pairs"] += 1
            tally["both applied"] += states == ["applied", "applied"]
            assert states == ["applied", "overridden"], (offset, ra, rb)
            winner, loser = (ra, rb) if ra.done else (rb, ra)
            final = (await a.control.values("speculative_disable_batch_threshold"))[0]
            tally["wrong final"] += final != winner.change.requested
            assert f"overridden by another client (now N={final}" in loser.change.detail, loser.change.detail
            assert "pid" in loser.change.detail  # who did it, from the journal
        assert tally == {"both applied": 0, "pairs": len(OFFSETS_S), "wrong final": 0}, tally
    finally:
        await a.close()
        await b.close()
    entries = [e for e in journal.read(private_state, target=sim.url) if e.result not in journal.STEPS]
    assert len(entries) == 2 * len(OFFSETS_S)
    assert sorted({e.result for e in entries}) == ["applied", "overridden"]
    assert all(e.user and e.host and e.pid and e.action == "threshold" and e.old is not None for e in entries)


async def test_a_session_shows_a_change_it_did_not_make(sim_factory, private_state):
    sim = sim_factory(tp=1, threshold=5)
    sim.wait_ready()
    watcher, other = await _started(sim.url), await _started(sim.url)
    try:
        assert (await other.set_threshold(8)).done
        for _ in range(100):
            change = watcher.snapshot().last_change
            if change is not None and change.state == "elsewhere":
                break
            await asyncio.sleep(0.05)
        assert change.state == "elsewhere" and change.requested == 8, change
        assert change.detail.startswith("N changed elsewhere: 5 -> 8, by ") and " pid " in change.detail
        assert (await watcher.set_threshold(6)).done  # its own change is not "elsewhere"
        await asyncio.sleep(1.0)
        assert watcher.snapshot().last_change.state == "applied"
    finally:
        await watcher.close()
        await other.close()
