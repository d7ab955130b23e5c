"""Per-member outcomes and the fleet's one exit code."""
from __future__ import annotations

import pytest

from server_control.fleet.member import FAILED, NO_ANSWER, OK, PENDING, REFUSED, MemberResult, change_outcome, exit_code
from server_control.model.snapshot import SettingChange


@pytest.mark.parametrize("change, outcome", [
    ({"state": "applied", "detail": "read back on 2 DP ranks"}, OK),
    ({"state": "pending", "detail": "sent"}, PENDING),
    ({"state": "refused", "detail": "must be >= 0"}, REFUSED),
    ({"state": "unsupported", "detail": "stock SGLang"}, REFUSED),
    ({"state": "error", "detail": "/set_internal_state: timed out"}, NO_ANSWER),
    ({"state": "error", "detail": "/server_info: connection refused or host unreachable (x)"}, NO_ANSWER),
    ({"state": "error", "detail": "server said true but read-back shows 3"}, FAILED),
])
def test_change_outcome(change, outcome):
    assert change_outcome(SettingChange.from_json(change)) == outcome


@pytest.mark.parametrize("outcomes, code", [
    ([OK, OK], 0), ([OK, PENDING], 3), ([PENDING, REFUSED], 1), ([OK, NO_ANSWER], 1), ([FAILED], 1), ([], 0),
])
def test_exit_code_aggregates(outcomes, code):
    results = [MemberResult(f"m{i}", "verify", o, "") for i, o in enumerate(outcomes)]
    assert exit_code(results) == code
    assert [r.stands_out for r in results] == [o in (REFUSED, NO_ANSWER, FAILED) for o in outcomes]
