"""Per-member outcomes and the fleet's one exit code."""

from __future__ import annotations

import pytest

from server_control.fleet.member import MemberResult, change_outcome, exit_code
from server_control.model.snapshot import SettingChange
from server_control.model.vocabulary import MemberOutcome


@pytest.mark.parametrize(
    "change, outcome",
    [
        ({"state": "applied", "detail": "read back on 2 DP ranks"}, MemberOutcome.OK),
        ({"state": "pending", "detail": "sent"}, MemberOutcome.PENDING),
        ({"state": "refused", "detail": "must be >= 0"}, MemberOutcome.REFUSED),
        ({"state": "unsupported", "detail": "stock SGLang"}, MemberOutcome.REFUSED),
        ({"state": "error", "detail": "/set_internal_state: timed out"}, MemberOutcome.NO_ANSWER),
        ({"state": "error", "detail": "/server_info: connection refused or host unreachable (x)"}, MemberOutcome.NO_ANSWER),
        ({"state": "error", "detail": "server said true but read-back shows 3"}, MemberOutcome.FAILED),
    ],
)
def test_change_outcome(change, outcome):
    assert change_outcome(SettingChange.from_json(change)) == outcome


@pytest.mark.parametrize(
    "outcomes, code",
    [
        ([MemberOutcome.OK, MemberOutcome.OK], 0),
        ([MemberOutcome.OK, MemberOutcome.PENDING], 3),
        ([MemberOutcome.PENDING, MemberOutcome.REFUSED], 1),
        ([MemberOutcome.OK, MemberOutcome.NO_ANSWER], 1),
        ([MemberOutcome.FAILED], 1),
        ([], 0),
    ],
)
def test_exit_code_aggregates(outcomes, code):
    results = [MemberResult(f"m{i}", "verify", o, "") for i, o in enumerate(outcomes)]
    assert exit_code(results) == code
    assert [r.stands_out for r in results] == [
        o in (MemberOutcome.REFUSED, MemberOutcome.NO_ANSWER, MemberOutcome.FAILED) for o in outcomes
    ]


def test_a_row_is_built_only_after_its_session_published_a_change(monkeypatch):
    """The fleet screen asks every member for its row each second: a session that published
    nothing since (no poll, no run change) costs no snapshot build; log lines are not in the row."""
    from server_control.fleet import member as member_mod
    from server_control.fleet.member import Member
    from server_control.fleet.spec import URL, MemberSpec
    from server_control.host.ports import free_port
    from server_control.session.session import Session

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens; the session is not started
    session = Session.attach(url)
    builds = []
    real = session.snapshot
    monkeypatch.setattr(session, "snapshot", lambda: builds.append(1) or real())
    member = Member(MemberSpec("m0", URL, url=url), session)
    first = member.row()
    assert member.row() == first and len(builds) == 1, f"{len(builds)} builds for an unchanged member"
    session._publish("logs")
    member.row()
    assert len(builds) == 1, "a log line rebuilt the row"
    session._publish("snapshot")  # what a poll or a run change publishes
    member.row()
    assert len(builds) == 2, "a published change did not rebuild the row"
    clock = [member_mod.time.monotonic() + member_mod.ROW_MAX_AGE_S + 1]
    monkeypatch.setattr(member_mod.time, "monotonic", lambda: clock[0])
    member.row()
    assert len(builds) == 3, "a row older than ROW_MAX_AGE_S was not rebuilt"
