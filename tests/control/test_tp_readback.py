"""Every TP rank, not rank 0: SGLang answers /set_internal_state from TP0 only, so the
read-back also checks each TP rank the server publishes (dynamic_speculation.ranks), and
verification fails on a rank that disagrees or on the patch's own "not active" reason."""

from __future__ import annotations

from server_control.control import verify as v
from server_control.control.settings import Control
from server_control.protocol.runtime_settings import THRESHOLD
from server_control.telemetry.sample import sample_from_server_info


async def test_a_tp_rank_that_did_not_take_the_change_is_named(stand):
    srv = stand("stalerank")  # an older patch: TP0 answers true, TP1 kept 5
    control = Control(srv.url)
    result = await control.set_setting(THRESHOLD.key, 9)
    await control.aclose()
    assert result.state == "error", result
    assert result.detail == ("server said true but TP1 reads speculative_disable_batch_threshold=5 (want 9)")


def _sample(dynamic: dict):
    return sample_from_server_info(
        0.0, {"internal_states": [{"speculative_disable_batch_threshold": 4, "dynamic_speculation": dynamic}]}
    )


INIT = dict(ranks_expected=2, server_ready=True, log_attached=False)


def test_initialisation_fails_with_the_patch_reason_from_server_info():
    reason = "TP ranks disagree: TP1: could not build ...; ready: TP0; the switch is off on every rank"
    got = v.initialisation([], [], [], sample=_sample({"enabled": False, "active": False, "reason": reason}), **INIT)
    assert (got.status, got.cause) == ("fail", reason)
    assert got.evidence == "/server_info internal_states[0].dynamic_speculation: active false"


def test_initialisation_fails_on_tp_ranks_that_disagree():
    rows = [
        {"rank": 0, "active": True, "threshold": 8, "mode": "speculative"},
        {"rank": 1, "active": True, "threshold": 4, "mode": "speculative"},
    ]
    got = v.initialisation([], [], [], sample=_sample({"active": True, "ranks": rows}), **INIT)
    assert got.status == "fail"
    assert got.cause == "TP ranks disagree: TP1 threshold=4 (TP0: threshold=8)"


def test_agreeing_ranks_leave_the_layer_to_the_log():
    rows = [{"rank": r, "active": True, "threshold": 8, "mode": "speculative"} for r in (0, 1)]
    got = v.initialisation([], [], [], sample=_sample({"active": True, "ranks": rows}), **INIT)
    assert got.status == "pending"  # no log attached: the init lines decide
