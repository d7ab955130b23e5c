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
from server_control.telemetry.sample import sample_from_server_info

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
