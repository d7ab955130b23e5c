"""``SessionLike.advice()``: the advisor's answer comes through the session, from this run's
server only, out of the cost curves of the session's last poll (no request of its own: the
poller reads `/server_info` already). A server that answers on the run's port but is not this
run's gives no advice (the same ``foreign`` state that turns steering off)."""

from __future__ import annotations

import time

import pytest

from server_control.advice.source import SourceError
from server_control.host.ports import free_port
from server_control.session.run_backends import AttachedRun
from server_control.session.session import Session
from server_control.telemetry.sample import sample_from_server_info


class _NotOurs(AttachedRun):
    """A run whose port is held by a process that is not the run's."""

    def owns_server(self) -> bool | None:
        return False


async def test_a_server_that_is_not_this_runs_gives_no_advice(monkeypatch):
    read = []
    monkeypatch.setattr("server_control.session.session.advice_from", lambda *a: read.append(a))
    session = Session(f"http://127.0.0.1:{free_port()}", _NotOurs())
    session.poller.on_sample(sample_from_server_info(time.time(), {"tp_size": 1, "internal_states": [{}]}))
    assert session.snapshot().server.foreign
    with pytest.raises(SourceError, match="not this run's server"):
        await session.advice()
    assert read == []  # nothing of the other server's was used


def _info(threshold: int) -> dict:
    from server_control.protocol.cost_curves import CostCounters

    live = {"threshold": threshold, "mode": "speculative", "cost_curves": CostCounters().snapshot()}
    return {"tp_size": 1, "model_path": "m", "internal_states": [{"dynamic_speculation": live}]}


async def test_the_advice_comes_from_the_last_poll_without_a_request():
    """Nothing listens on the URL: only the poll's own answer can give the advice (before, the
    session read `/server_info` again for it and failed with connection refused)."""
    session = Session(f"http://127.0.0.1:{free_port()}", AttachedRun())
    session.poller.on_sample(sample_from_server_info(time.time(), _info(7)))
    adv = await session.advice()
    assert adv.current == 7 and adv.suggested is None  # no steps counted yet: not enough data
    session.poller.on_sample(sample_from_server_info(time.time(), {"tp_size": 1, "internal_states": [{}]}))
    with pytest.raises(SourceError, match="no dynamic_speculation state"):
        await session.advice()


async def test_this_runs_server_is_read_and_an_unanswered_read_is_said():
    session = Session(f"http://127.0.0.1:{free_port()}", AttachedRun())  # nothing listens there
    with pytest.raises(SourceError):
        await session.advice()
