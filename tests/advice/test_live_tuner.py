"""The supervisor's tuner (server_control/supervision/live_tuner.py) against a real
simulator over HTTP, its own tuner off: it reads the curves, moves N once for the whole
server through the control client (read back on every rank), logs and journals the move
with its evidence, and an operator's N turns it off."""

from __future__ import annotations

import asyncio
import time

import httpx

from server_control.control.settings import Control
from server_control.protocol.tuner import MOVE_PREFIX, TuneSettings
from server_control.supervision.live_tuner import LiveTuner

SCALE = 20  # the simulator's time scale: the tuner's clock runs in its seconds


def _live(url):
    (state,) = httpx.get(url + "/server_info", timeout=5).json()["internal_states"]
    return state["dynamic_speculation"]


async def test_the_supervisor_tunes_n_and_the_operator_wins(sim_factory):
    sim = sim_factory(
        "--sim-explore-share", "0.1", "--tp-size", "2", threshold=10, traffic="phases:s=10000,c=1-14,period=12", time_scale=SCALE
    )
    sim.wait_ready()
    said, journaled = [], []
    tuner = LiveTuner(
        sim.url,
        Control(sim.url),
        TuneSettings(1, 16),
        say=said.append,
        journal=lambda *a, **kw: journaled.append((a, kw)),
        clock=lambda: time.monotonic() * SCALE,
    )
    assert "auto_tune" not in _live(sim.url)  # the simulator's own tuner is off
    move, deadline = None, time.monotonic() + 90
    while move is None and time.monotonic() < deadline:
        move = await tuner.step()
        await asyncio.sleep(0.1)
    assert move is not None and move.old == 10 and move.new < 10, (said, tuner.last_error)
    assert said[-1] == move.line and move.line.startswith(f"{MOVE_PREFIX}10 -> {move.new} (auto: ")
    assert journaled[-1][0] == ("threshold", "applied", move.line) and journaled[-1][1]["new"] == move.new
    live = _live(sim.url)
    assert live["threshold"] == move.new and {r["threshold"] for r in live["ranks"]} == {move.new}
    sim.wait_for_log(f"threshold changed 10 -> {move.new}", count=2)  # every TP rank applied it
    # the operator's N wins: tuning turns off, no move after it
    r = httpx.post(sim.url + "/set_internal_state", json={"server_args": {"speculative_disable_batch_threshold": 13}}, timeout=5)
    assert r.json() == [True]
    for _ in range(30):
        assert await tuner.step() is None
        await asyncio.sleep(0.1)
    assert tuner.tuner.on is False and said[-1] == "Dynamic speculation: auto-tune off (threshold set to 13 by the operator)"
    assert _live(sim.url)["threshold"] == 13
    await tuner.control.aclose()


async def test_a_restarted_server_starts_a_new_window_not_an_operator_change(monkeypatch):
    """Cumulative counters start afresh when the server restarts: the tuner must not
    subtract the old life's counters from the new one, nor take the N the new life starts
    with for the operator's."""
    from server_control.advice.source import Reading
    from tests.support.advice import speculative_curves as curves

    readings = iter([Reading("u", "m", 6, "auto", curves(500)), Reading("u", "m", 5, "auto", curves(20))])
    monkeypatch.setattr("server_control.supervision.live_tuner.read_server", lambda *a: next(readings))
    tuner = LiveTuner("u", None, TuneSettings(1, 16), clock=lambda: 0.0)
    assert await tuner.step() is None and tuner.known == 6
    assert await tuner.step() is None
    assert tuner.tuner.on is True and tuner.known == 5
    assert len(tuner.tuner._history) == 1  # the new life's reading only
