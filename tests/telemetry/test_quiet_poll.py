"""A quiet poller: a server that answered QUIET_AFTER polls in a row idle (nothing running or
queued, no decode step taken) is polled every QUIET_INTERVAL_S; anything else (a batch, a
queue, a step, an error) or ``wake()``/``poke()`` ends the quiet at once. The session wakes
it on a log line that is not a poll."""

from __future__ import annotations

import asyncio

from server_control.logs import Record
from server_control.model.load import Load
from server_control.session.session import Session
from server_control.telemetry import http_poll
from server_control.telemetry.http_poll import QUIET_AFTER, HttpPoller
from server_control.telemetry.sample import RankState, Sample
from tests.support.sim import start_sim


def sample(batch: int | None = 0, queue: int | None = 0, steps: int = 40, reachable: bool = True) -> Sample:
    rank = RankState(0, True, 5, 1, 10, "auto", {"steps": {"speculative": steps, "target_only": 0}}, None, None)
    s = Sample(ts=0.0, reachable=reachable, ranks=[rank], error=None if reachable else "refused")
    s.load = Load(batch=batch, queue=queue, source="loads")
    return s


def quiet_poller() -> HttpPoller:
    poller = HttpPoller("http://127.0.0.1:9", interval_s=1.0)
    for _ in range(QUIET_AFTER):
        assert not poller.quiet and poller.next_delay() == 1.0
        poller._count_quiet(sample())
    assert poller.quiet and poller.next_delay() == http_poll.QUIET_INTERVAL_S
    return poller


def test_quiet_after_idle_polls_and_anything_else_ends_it():
    for other in (sample(batch=2), sample(queue=1), sample(steps=41), sample(batch=None), sample(reachable=False)):
        poller = quiet_poller()
        poller._count_quiet(other)
        assert not poller.quiet and poller.next_delay() == 1.0, other
    poller = quiet_poller()
    poller.poke()
    assert not poller.quiet and poller._wake.is_set()
    poller = quiet_poller()
    poller.wake()
    assert not poller.quiet and poller._wake.is_set()
    busy = HttpPoller("http://127.0.0.1:9")
    busy.wake()  # not quiet: the next poll is due anyway, no extra poll
    assert not busy._wake.is_set()
    # a poller asked to poll slower than the quiet interval keeps its own interval
    slow = HttpPoller("http://127.0.0.1:9", interval_s=10.0)
    for _ in range(QUIET_AFTER):
        slow._count_quiet(sample())
    assert slow.quiet and slow.next_delay() == 10.0


async def test_an_idle_server_is_polled_less_until_woken(tmp_path, monkeypatch):
    """Real HTTP to an idle simulator: 0.1 s polls, then one a second (QUIET_INTERVAL_S made
    1 s for the test); ``wake()`` brings a poll at once. Without the quiet rule: ~25 polls."""
    monkeypatch.setattr(http_poll, "QUIET_INTERVAL_S", 1.0)
    with start_sim(tmp_path, tp=1, traffic="idle") as sim:
        sim.wait_ready()
        poller = HttpPoller(sim.url, interval_s=0.1)
        task = asyncio.create_task(poller.run())
        try:
            await asyncio.sleep(2.5)
            assert poller.quiet and poller.last is not None and poller.last.reachable
            assert poller.polls <= QUIET_AFTER + 4, poller.polls
            before = poller.polls
            poller.wake()
            await asyncio.sleep(0.35)
            assert poller.polls >= before + 2, (before, poller.polls)  # at once, then at 0.1 s again
        finally:
            poller.stop()
            await task


def test_a_log_line_that_is_not_a_poll_wakes_the_session_poller():
    session = Session.attach("http://127.0.0.1:9")
    for _ in range(QUIET_AFTER):
        session.poller._count_quiet(sample())
    poll_line = '[2026-12-01 10:00:00] INFO:     127.0.0.1:5000 - "GET /server_info HTTP/1.1" 200 OK'
    session.store.extend([Record(0, "http", poll_line)])
    session.mark("a console line")
    session._on_records(session.store.last_seq)
    assert session.poller.quiet and not session.poller._wake.is_set()  # polls and our own lines: still quiet
    session.store.extend([Record(0, "prefill", "[2026-12-01 10:00:01] Prefill batch, #new-seq: 1")])
    session._on_records(session.store.last_seq)
    assert not session.poller.quiet and session.poller._wake.is_set()
