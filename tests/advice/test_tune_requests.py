"""Turning the supervisor's tuner back on through the journal
(server_control/supervision/tune_requests.py, live_tuner.py): the follower sees only what
was appended since its last look (complete lines, across a rotation), a request turns an
operator-stopped tuner on with a new window and the N found then as its own, and the
answer carries the request's op."""

from __future__ import annotations

import os

from server_control.advice.source import Reading
from server_control.protocol.tuner import TuneSettings
from server_control.state import journal
from server_control.supervision import tune_requests as tr
from server_control.supervision.live_tuner import ALREADY_ON_LINE, LiveTuner
from tests.support.advice import speculative_curves as curves

URL = "http://127.0.0.1:41001"


def test_the_follower_sees_new_requests_for_its_server_only(tmp_path):
    sd = tmp_path / "state"
    old = tr.ask(sd, URL, "p")  # before the follower: not this run's
    follow = tr.Follower(sd)
    assert old is not None and follow.requests(URL) == []
    mine = tr.ask(sd, URL + "/", "p")
    tr.ask(sd, "http://127.0.0.1:41002", "q")  # another server's
    journal.record(sd, "threshold", target=URL, result="applied")  # not a request
    got = follow.requests(URL)
    assert [e.op for e in got] == [mine.op]
    assert follow.requests(URL) == []  # seen once


def test_a_half_written_line_waits_for_its_end(tmp_path):
    sd = tmp_path / "state"
    follow = tr.Follower(sd, at_end=False)
    e = tr.ask(sd, URL, "p")
    path = journal.journal_path(sd)
    whole = path.read_bytes()
    path.write_bytes(whole[:-10])  # the writer is mid-line
    follow2 = tr.Follower(sd, at_end=False)
    assert follow2.requests(URL) == []
    path.write_bytes(whole)
    assert [x.op for x in follow2.requests(URL)] == [e.op]
    assert [x.op for x in follow.requests(URL)] == [e.op]


def test_a_rotation_loses_no_request(tmp_path):
    sd = tmp_path / "state"
    tr.ask(sd, URL, "p")
    follow = tr.Follower(sd)
    before = tr.ask(sd, URL, "p")  # lands in the file about to move away
    path = journal.journal_path(sd)
    os.replace(path, path.with_name(journal.JOURNAL_NAME + ".1"))
    after = tr.ask(sd, URL, "p")
    assert [x.op for x in follow.requests(URL)] == [before.op, after.op]


def test_answer_finds_the_reply_with_the_op_or_times_out(tmp_path):
    sd = tmp_path / "state"
    follow = tr.Follower(sd)
    ask = tr.ask(sd, URL, "p")
    assert tr.answer(follow, ask.op, 0.0) is None
    journal.record(sd, tr.ACTION, target=URL, result=tr.ON, detail="other", op="someoneelse")
    journal.record(sd, tr.ACTION, target=URL, result=tr.ON, detail="yes", op=ask.op)
    got = tr.answer(follow, ask.op, 0.0)
    assert got is not None and got.detail == "yes"


async def test_a_request_turns_the_stopped_tuner_on_with_the_operators_n(monkeypatch, tmp_path):
    sd = tmp_path / "state"
    follow = tr.Follower(sd)
    readings = iter(
        [
            Reading(URL, "m", 6, "auto", curves(500)),
            Reading(URL, "m", 13, "auto", curves(600)),  # the operator set 13: off
            Reading(URL, "m", 13, "auto", curves(700)),  # off: nothing
            Reading(URL, "m", 13, "auto", curves(800)),  # asked: on, 13 is the tuner's now
            Reading(URL, "m", 13, "auto", curves(900)),  # ask again: already on
        ]
    )
    monkeypatch.setattr("server_control.supervision.live_tuner.read_server", lambda *a: next(readings))
    said, journaled = [], []
    tuner = LiveTuner(
        URL,
        None,
        TuneSettings(1, 16),
        say=said.append,
        journal=lambda *a, **kw: journaled.append((a, kw)),
        clock=lambda: 0.0,
        asks=lambda: follow.requests(URL),
    )
    await tuner.step()
    await tuner.step()
    assert tuner.tuner.on is False
    await tuner.step()
    assert tuner.tuner.on is False  # nobody asked
    ask = tr.ask(sd, URL, "p")
    await tuner.step()
    assert tuner.tuner.on is True and tuner.known == 13  # not taken for another operator change
    assert said[-1].startswith("Dynamic speculation: auto-tune on again (asked by ") and "pid" in said[-1]
    assert journaled[-1][0][:2] == ("auto-tune", "on") and journaled[-1][1] == {"op": ask.op}
    assert ask.key is None  # neither entry is a change of a setting (control/guard.py)
    assert len(tuner.tuner._history) == 1  # a new window: the reading after the request only
    again = tr.ask(sd, URL, "p")
    await tuner.step()
    assert said[-1] == ALREADY_ON_LINE.format(who=again.who) and journaled[-1][1]["op"] == again.op


async def test_asked_right_after_the_operators_n_before_the_tuner_saw_it_stays_on(monkeypatch, tmp_path):
    sd = tmp_path / "state"
    follow = tr.Follower(sd)
    readings = iter([Reading(URL, "m", 6, "auto", curves(500)), Reading(URL, "m", 13, "auto", curves(600))])
    monkeypatch.setattr("server_control.supervision.live_tuner.read_server", lambda *a: next(readings))
    tuner = LiveTuner(URL, None, TuneSettings(1, 16), clock=lambda: 0.0, asks=lambda: follow.requests(URL))
    await tuner.step()
    tr.ask(sd, URL, "p")  # `threshold 13` then at once `threshold auto`: one poll sees both
    await tuner.step()
    assert tuner.tuner.on is True and tuner.known == 13
