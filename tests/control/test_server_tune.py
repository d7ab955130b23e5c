"""ServerTuneWatch on polls made by hand: a move journaled once whoever sees it, an
observer's first poll, several moves between two polls, a server that restarted, an
operator's N after a move (not the server's), and the status bar's words."""

from __future__ import annotations

from server_control.control.server_tune import ACTION, ServerMove, ServerTuneWatch, move_op
from server_control.model.snapshot import SettingChange
from server_control.model.vocabulary import ChangeState
from server_control.protocol import decision
from server_control.state import journal
from server_control.telemetry.sample import RankState, Sample

URL = "http://127.0.0.1:1"
EV = "target-only faster from batch 10, 412 vs 388 tok/s, n=1234 steps over 30 s"


def poll(n: int, moves: int, old: int | None = None, new: int | None = None, ev: str = EV) -> Sample:
    last = {"old": old, "new": new, "evidence": ev} if old is not None else None
    dyn = {"threshold": n, "auto_tune": {"on": True, "off_reason": None, "moves": moves, "last_move": last}}
    rank = RankState.from_json(0, {decision.THRESHOLD_KEY: n, decision.STATE_KEY: dyn})
    return Sample(ts=0.0, reachable=True, ranks=[rank])


def moves(state) -> list[journal.Entry]:
    return [e for e in journal.read(state) if e.action == ACTION]


def test_a_move_is_journaled_once_by_any_number_of_observers(tmp_path):
    a, b = ServerTuneWatch(URL, tmp_path), ServerTuneWatch(URL, tmp_path)
    for w in (a, b):
        assert w.observe(poll(8, 0)) is None
    for w in (a, b):
        move = w.observe(poll(10, 1, 8, 10))
        assert move is not None and move.words() == f"auto-tuned 8 -> 10 ({EV})"
    (e,) = moves(tmp_path)
    assert (e.key, e.old, e.new, e.result) == (decision.THRESHOLD_KEY, 8, 10, "applied")
    assert e.detail == f"Dynamic speculation: threshold 8 -> 10 (auto: {EV})" and e.op.startswith("tune-")
    assert a.observe(poll(10, 1, 8, 10)) is None  # the same move again: nothing new
    restarted = ServerTuneWatch(URL, tmp_path)  # an observer's restart: its first poll
    assert restarted.observe(poll(10, 1, 8, 10)) is not None
    assert len(moves(tmp_path)) == 1


def test_a_first_poll_journals_a_move_nobody_saw_and_notes_it(tmp_path):
    ServerTuneWatch(URL, tmp_path).observe(poll(10, 3, 8, 10))
    (e,) = moves(tmp_path)
    assert e.detail.endswith("[seen at the first poll of an observer or of a restarted server]")


def test_several_moves_between_polls_are_said(tmp_path):
    w = ServerTuneWatch(URL, tmp_path)
    w.observe(poll(6, 0))
    w.observe(poll(10, 2, 8, 10))
    (e,) = moves(tmp_path)
    assert (e.old, e.new) == (8, 10) and "[2 moves since the previous poll (N was 6)" in e.detail


def test_a_restarted_server_starts_over_and_an_operators_n_is_not_a_move(tmp_path):
    w = ServerTuneWatch(URL, tmp_path)
    w.observe(poll(8, 0))
    w.observe(poll(10, 1, 8, 10))
    assert w.observe(poll(7, 1, 8, 10)) is None  # the operator's 7: not the server's move
    w.observe(Sample(ts=0.0, reachable=False))
    ev2 = EV.replace("1234", "99")
    assert w.observe(poll(10, 1, 8, 10, ev2)) is not None  # a new run's first move, same old/new
    assert len(moves(tmp_path)) == 2
    assert move_op(URL, ServerMove(1, 8, 10, ev2)) != move_op(URL, ServerMove(1, 8, 10, EV))


def test_a_move_published_before_its_n_is_the_servers_when_n_arrives(tmp_path):
    """The server publishes the move's record when its tuner decides, and N when the
    scheduler applies it (a step later: the move goes through the settings queue). A poll
    between the two sees the record ahead of N; the next poll, N at the move's new value with
    the count unchanged, is where the move is seen: the server's, not "changed elsewhere".
    (A CI run under load said "N changed elsewhere: 9 -> 7" of the simulator's own move.)"""
    w = ServerTuneWatch(URL, tmp_path)
    w.observe(poll(9, 1, 10, 9))
    assert w.observe(poll(9, 2, 9, 7)) is None  # decided, not applied yet
    move = w.observe(poll(7, 2, 9, 7))
    assert move is not None and (move.old, move.new) == (9, 7)
    (_, e) = moves(tmp_path)
    assert (e.old, e.new) == (9, 7) and "moves since" not in e.detail and "first poll" not in e.detail
    assert w.observe(poll(7, 2, 9, 7)) is None  # told once


def test_the_status_bar_says_auto_tuned_with_its_evidence():
    from console.widgets.status_bar import change_text

    tc = SettingChange(10, ChangeState.AUTO_TUNED, f"auto-tuned 8 -> 10 ({EV})", key=decision.THRESHOLD_KEY)
    assert change_text(tc).plain == f" auto-tuned 8 -> 10 ({EV})"


async def test_a_move_made_while_a_poll_failed_is_said_as_the_servers(tmp_path):
    """A poll that times out (a loaded machine) ends the guard's comparison: the next poll is
    compared with nothing, as after a restart. A move of the server's own tuner in that gap was
    journaled but never said (a three-worker fresh clone: the tuner went 10 -> 4 across such a
    gap and settled; the screen said nothing in 30 s). It is said now, from the N the last poll
    before the gap showed; a session's first poll still says nothing, and an N the server's
    last move does not explain is no move of its own."""
    from server_control.control.guard import AUTO_TUNED, SettingGuard
    from server_control.control.settings import Control

    control = Control(URL)
    try:
        guard = SettingGuard(control, URL, state_dir=tmp_path)
        assert guard.elsewhere(poll(10, 0)) == []  # the session's first poll
        assert guard.elsewhere(Sample(ts=0.0, reachable=False, error="timed out")) == []
        (said,) = guard.elsewhere(poll(4, 3, 6, 4))
        assert said == (decision.THRESHOLD_KEY, 10, 4, AUTO_TUNED)
        assert guard.seen(*said).detail == f"auto-tuned 10 -> 4 ({EV})"
        assert guard.elsewhere(poll(4, 3, 6, 4)) == []  # said once
        guard.elsewhere(Sample(ts=0.0, reachable=False, error="timed out"))
        assert guard.elsewhere(poll(5, 3, 6, 4)) == []  # 5: not the server's last move (an operator's)
        first = SettingGuard(control, URL, state_dir=tmp_path)
        assert first.elsewhere(poll(4, 3, 6, 4)) == []  # another session's first poll: no news
    finally:
        await control.aclose()
