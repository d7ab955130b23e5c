"""A restart's re-apply is the run's own even while it is in flight: the supervisor journals
"reapply" pending before it sets the value, and a poll that sees the value before the result
is journaled names the re-apply, not the older change that set the same value (it named the
headless `threshold 7` that the restart carried: "N changed elsewhere: 5 -> 7, by ... pid P
(specconsole threshold)", and the label stuck, seen in tests/session/test_own_reapply.py)."""

from __future__ import annotations

from server_control.control.guard import REAPPLY, SettingGuard
from server_control.control.settings import Control
from server_control.protocol import decision
from server_control.state import journal
from server_control.telemetry.sample import Sample, sample_from_server_info

TARGET = "http://127.0.0.1:9"  # never contacted: the guard only reads the journal here


def _sample(threshold: int):
    return sample_from_server_info(0.0, {"internal_states": [{"speculative_disable_batch_threshold": threshold}]})


async def test_a_pending_reapply_names_the_restart(tmp_path):
    journal.record(tmp_path, "threshold", target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7)
    journal.record(tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result=journal.PENDING, old=5, new=7)
    control = Control(TARGET)
    try:
        guard = SettingGuard(control, TARGET, state_dir=tmp_path)
        assert guard.elsewhere(_sample(5)) == []  # the new server's first values are no news
        assert guard.elsewhere(_sample(7)) == [(decision.THRESHOLD_KEY, 5, 7, REAPPLY)]
    finally:
        await control.aclose()


async def test_another_clients_change_in_flight_is_still_theirs(tmp_path):
    journal.record(tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7)
    journal.record(tmp_path, "threshold", target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=7, new=9)
    control = Control(TARGET)
    try:
        guard = SettingGuard(control, TARGET, state_dir=tmp_path)
        guard.elsewhere(_sample(7))
        (key, old, new, who), *_ = guard.elsewhere(_sample(9))
        assert (key, old, new) == (decision.THRESHOLD_KEY, 7, 9) and who not in ("", REAPPLY), who
    finally:
        await control.aclose()


def _unreachable():
    return Sample(ts=0.0, reachable=False, error="connection refused")


async def test_a_reapply_the_first_poll_after_the_restart_already_shows_is_named(tmp_path):
    """Polls far apart (a loaded machine: tests/session/test_own_reapply.py failed so in a CI
    run; polls 2.5 s apart failed it every time) never see the new server's launch value:
    the first poll after the gap shows 7 already. The journal's re-apply since the server was
    last reached names it; before, nothing did and the headless change's label stayed."""
    journal.record(tmp_path, "threshold", target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7)
    control = Control(TARGET)
    try:
        guard = SettingGuard(control, TARGET, state_dir=tmp_path)
        assert guard.elsewhere(_sample(7)) == []  # the session's first poll: no news
        assert guard.elsewhere(_unreachable()) == []  # the restart
        journal.record(tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7)
        assert guard.elsewhere(_sample(7)) == [(decision.THRESHOLD_KEY, 5, 7, REAPPLY)]
        assert guard.elsewhere(_sample(7)) == []  # said once
    finally:
        await control.aclose()


async def test_a_reapply_from_before_the_server_was_last_reached_is_not_news_again(tmp_path):
    journal.record(tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7)
    control = Control(TARGET)
    try:
        guard = SettingGuard(control, TARGET, state_dir=tmp_path)
        assert guard.elsewhere(_sample(7)) == []
        assert guard.elsewhere(_unreachable()) == []  # a blip: no restart, nothing re-applied since
        assert guard.elsewhere(_sample(7)) == []
    finally:
        await control.aclose()


async def test_a_restart_between_two_polls_is_named_by_its_reapply(tmp_path):
    """No poll saw the server down: 7 before, 7 after, the re-apply in between (pending, then
    applied: said once, not again for its result line)."""
    control = Control(TARGET)
    try:
        guard = SettingGuard(control, TARGET, state_dir=tmp_path)
        assert guard.elsewhere(_sample(7)) == []
        journal.record(
            tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result=journal.PENDING, old=5, new=7, op="r1"
        )
        assert guard.elsewhere(_sample(7)) == [(decision.THRESHOLD_KEY, 5, 7, REAPPLY)]
        journal.record(tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7, op="r1")
        assert guard.elsewhere(_sample(7)) == []
    finally:
        await control.aclose()


async def test_polls_read_the_journal_only_when_it_changed(tmp_path, monkeypatch):
    """The re-apply check is on every poll's path: an unchanged journal file is not read
    again (it was read once per setting on every poll)."""
    journal.record(tmp_path, "threshold", target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7)
    reads = []
    real_read = journal.read
    monkeypatch.setattr(journal, "read", lambda *a, **kw: reads.append(1) or real_read(*a, **kw))
    control = Control(TARGET)
    try:
        guard = SettingGuard(control, TARGET, state_dir=tmp_path)
        for _ in range(5):
            assert guard.elsewhere(_sample(7)) == []
        assert len(reads) <= 1, len(reads)
        journal.record(tmp_path, REAPPLY, target=TARGET, key=decision.THRESHOLD_KEY, result="applied", old=5, new=7, op="r2")
        assert guard.elsewhere(_sample(7)) == [(decision.THRESHOLD_KEY, 5, 7, REAPPLY)]
    finally:
        await control.aclose()
