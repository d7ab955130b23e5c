"""``SessionLike.advice()``: the advisor's answer comes through the session, from this run's
server only. A server that answers on the run's port but is not this run's gives no advice
(the same ``foreign`` state that turns steering off), and nothing is read from it."""

from __future__ import annotations

import time

import pytest

from server_control.advice.source import SourceError
from server_control.proc.ports import free_port
from server_control.session.run_backends import AttachedRun
from server_control.session.session import Session
from server_control.telemetry.sample import sample_from_server_info


class _NotOurs(AttachedRun):
    """A run whose port is held by a process that is not the run's."""

    def owns_server(self) -> bool | None:
        return False


async def test_a_server_that_is_not_this_runs_gives_no_advice(monkeypatch):
    read = []
    monkeypatch.setattr("server_control.session.session.read_advice", lambda *a: read.append(a))
    session = Session(f"http://127.0.0.1:{free_port()}", _NotOurs())
    session.poller.on_sample(sample_from_server_info(time.time(), {"tp_size": 1, "internal_states": [{}]}))
    assert session.snapshot().server.foreign
    with pytest.raises(SourceError, match="not this run's server"):
        await session.advice()
    assert read == []  # nothing was asked of the other server


async def test_this_runs_server_is_read_and_an_unanswered_read_is_said():
    session = Session(f"http://127.0.0.1:{free_port()}", AttachedRun())  # nothing listens there
    with pytest.raises(SourceError):
        await session.advice()
