"""The server's own tuning moves (issue 21 item 4) reach the journal once each and the
console says "auto-tuned 10 -> 9 (...)", not "changed elsewhere": a real simulator that
tunes N itself (``--sim-auto-tune``), watched by two sessions at once and by a third one
started after the first closed (an observer restart), then `specconsole journal`.

The tuner settles (its cool-down and reversal rules): on this traffic it moves twice in the
first simulated minute and then holds. So the moves after the restart are provoked as an
operator would: N set by hand (tuning turns off: told "elsewhere", never "auto-tuned"), then
tuning turned on again, and the tuner moves N back from there."""

from __future__ import annotations

import asyncio
import collections
import time

import httpx
import pytest

from server_control.control.server_tune import ACTION
from server_control.model.vocabulary import ChangeState
from server_control.protocol import decision
from server_control.protocol.tuner import AUTO_TUNE_KEY, MOVE_PREFIX
from server_control.session.session import Session
from server_control.state import journal
from tests.support.cli import cli


@pytest.fixture
def private_state(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    return state


def _moves(state, url: str) -> list[journal.Entry]:
    return [e for e in journal.read(state, target=url) if e.action == ACTION]


async def _watch(sessions: dict[str, Session], seen: dict[str, list], until, timeout_s: float) -> None:
    """Every session's ``last_change`` as it changes, until ``until()`` or the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not until():
        for name, s in sessions.items():
            lc = s.snapshot().last_change
            if lc is not None and (not seen[name] or seen[name][-1] != lc):
                seen[name].append(lc)
        await asyncio.sleep(0.05)


def _told(changes: list, new: int) -> bool:
    return any(lc.key == decision.THRESHOLD_KEY and lc.requested == new for lc in changes)


async def test_each_server_move_is_journaled_once_and_told_as_auto_tuned(sim_factory, private_state):
    sim = sim_factory(
        "--sim-auto-tune", "1-16", "--sim-explore-share", "0.1",
        threshold=10, traffic="phases:s=10000,c=1-14,period=12", time_scale=20,
    )  # fmt: skip
    sim.wait_ready()
    a = Session.attach(sim.url, poll_interval_s=0.25)
    b = Session.attach(sim.url, poll_interval_s=0.25)
    await a.start()
    await b.start()
    seen: dict[str, list] = collections.defaultdict(list)
    c = None
    try:
        # the simulator's tuner moves by simulated time: a loaded machine gets there later
        await _watch({"a": a, "b": b}, seen, lambda: len(_moves(private_state, sim.url)) >= 1, 120)
        assert _moves(private_state, sim.url), sim.log_path.read_text()[-2000:]
        await a.close()
        c = Session.attach(sim.url, poll_interval_s=0.25)  # an observer restarted
        await c.start()
        await _watch({"b": b, "c": c}, seen, lambda: False, 2)
        before = len(_moves(private_state, sim.url))  # the same moves again: once each, below
        state = sim.url + "/set_internal_state"
        by_hand = {"server_args": {decision.THRESHOLD_KEY: 14}}
        assert httpx.post(state, json=by_hand, timeout=10).json() == [True]  # the operator: tuning off
        await _watch({"b": b, "c": c}, seen, lambda: _told(seen["c"], 14), 30)
        assert httpx.post(state, json={"server_args": {AUTO_TUNE_KEY: 1}}, timeout=10).json() == [True]
        await _watch({"b": b, "c": c}, seen, lambda: len(_moves(private_state, sim.url)) > before, 120)
        await _watch({"b": b, "c": c}, seen, lambda: False, 1)
    finally:
        for s in (a, b, c):
            if s is not None:
                await s.close()
    threshold_told = [lc for name in ("a", "b", "c") for lc in seen[name] if lc.key == decision.THRESHOLD_KEY]
    by_operator = [lc for lc in threshold_told if lc.requested == 14]
    assert by_operator and all(lc.state == ChangeState.ELSEWHERE for lc in by_operator), by_operator
    entries = _moves(private_state, sim.url)
    assert len(entries) > before, entries  # the move after the restart: journaled by b or c
    ops = [e.op for e in entries]
    assert len(set(ops)) == len(ops), [e.detail for e in entries]  # two observers, a restart: once each
    log = sim.log_path.read_text()
    for e in entries:
        line = e.detail.split(" [")[0]
        assert line.startswith(f"{MOVE_PREFIX}{e.old} -> {e.new} (auto: ") and line in log, (e, line)
        assert e.key == "speculative_disable_batch_threshold" and e.result == "applied"
    logged = [ln for ln in log.splitlines() if MOVE_PREFIX in ln and "(auto: " in ln]
    assert len(entries) <= len(logged)  # never more entries than moves the server logged
    told = [lc for lc in threshold_told if lc.requested != 14]
    assert any(lc.detail.startswith("auto-tuned 14 -> ") for lc in told), told  # the tuner's move from the operator's N, seen
    assert told and all(lc.state == ChangeState.AUTO_TUNED for lc in told), told  # never "elsewhere"
    assert all(lc.detail.startswith("auto-tuned ") and "(target-only faster" in lc.detail for lc in told), told

    out = cli("journal", "--url", sim.url)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if f"  {ACTION}  " in ln]
    assert len(lines) == len(entries), out.stdout
    assert all(f"{e.old} -> {e.new}  applied  {MOVE_PREFIX}{e.old} -> {e.new} (auto: " in ln for e, ln in zip(entries, lines)), (
        lines
    )
