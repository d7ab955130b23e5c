"""The real SchedulerInternalStateController accepts the four keys, refuses bad values
with the reason, and publishes each rank's live state in internal_states."""

import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402
from sglang.srt.managers.io_struct import GetInternalStateReq, SetInternalStateReq  # noqa: E402
from sglang.srt.managers.scheduler_components.internal_state import (  # noqa: E402
    SchedulerInternalStateController,
)
from sglang.srt.runtime_context import get_context  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

from server_control.sglang_patch import gate  # noqa: E402
from server_control.sglang_patch import worker as patch_worker  # noqa: E402
from tests.sglang.objects import Recorder, build_worker, decode_batch, require_patched_server_args, scheduler_for  # noqa: E402

KEY = "speculative_disable_batch_threshold"


@pytest.fixture
def rank(caplog):
    """One scheduler rank: a published config, a started worker, the real controller."""
    require_patched_server_args()
    caplog.set_level(logging.INFO)
    gate._reported = None
    override = get_context().override_server_args(
        speculative_algorithm="EAGLE3",
        speculative_eagle_topk=1,
        speculative_num_steps=3,
        speculative_num_draft_tokens=4,
        speculative_disable_batch_threshold=5,
        speculative_disable_min_dwell_steps=0,
    )
    server_args = override.install()
    worker = build_worker(ew.EAGLEWorkerV2, Recorder())
    worker._dynspec = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    worker.init_cuda_graphs()
    scheduler = scheduler_for(worker, SpeculativeAlgorithm.EAGLE3)
    controller = SchedulerInternalStateController(scheduler=scheduler, record_step_time=False)
    yield SimpleNamespace(worker=worker, controller=controller, switch=worker._dynspec.switch)
    override.restore()
    gate._reported = None


def set_state(controller, **values) -> bool:
    return controller.set_internal_state(SetInternalStateReq(server_args=values)).updated


def messages(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_threshold_is_accepted_and_effective_from_the_next_step(rank, caplog):
    assert set_state(rank.controller, **{KEY: 8}) is True
    assert rank.switch.threshold == 8
    assert messages(caplog, "threshold changed") == ["Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)"]
    assert get_context().config_leaf(KEY) == 8  # SGLang's own override, as readbacks see it
    rank.worker.forward_batch_generation(decode_batch(7))
    assert rank.worker.speculative_num_steps == 3  # 7 <= 8: speculative
    rank.worker.forward_batch_generation(decode_batch(9))
    assert rank.worker.speculative_num_steps == 0  # 9 > 8: target-only


def test_float_integer_from_json_is_accepted(rank):
    assert set_state(rank.controller, **{KEY: 6.0}) is True
    assert rank.switch.threshold == 6


@pytest.mark.parametrize(
    "value, reason",
    [
        (-1, "speculative_disable_batch_threshold must be >= 0, got -1"),
        (2.5, "speculative_disable_batch_threshold must be an integer, got 2.5"),
        (99999, "speculative_disable_batch_threshold 99999 is absurd: the maximum is 4096"),
    ],
)
def test_bad_threshold_is_refused_with_the_reason(rank, caplog, value, reason):
    assert set_state(rank.controller, **{KEY: value}) is False
    assert rank.switch.threshold == 5
    assert messages(caplog, "refused") == [f"Dynamic speculation: refused {KEY}={value}: {reason}"]


def test_one_refused_key_applies_nothing(rank):
    ok = set_state(rank.controller, **{KEY: 9, "speculative_disable_min_dwell_steps": -3})
    assert ok is False
    assert rank.switch.threshold == 5 and rank.switch.min_dwell_steps == 0


def test_unknown_key_is_still_sglangs_not_supported(rank, caplog):
    assert set_state(rank.controller, speculative_disable_nonsense=1) is False
    assert messages(caplog, "is not supported") == ["Updating speculative_disable_nonsense is not supported."]


def test_force_mode_hysteresis_and_dwell(rank, caplog):
    assert set_state(rank.controller, speculative_disable_force_mode=2) is True  # target_only
    assert rank.switch.force == "target_only"
    rank.worker.forward_batch_generation(decode_batch(1))
    assert rank.worker.speculative_num_steps == 0
    assert messages(caplog, "switched to") == ["Dynamic speculation: switched to target-only (forced)"]
    assert set_state(rank.controller, speculative_disable_force_mode=0) is True  # auto
    assert set_state(rank.controller, speculative_disable_hysteresis=2, speculative_disable_min_dwell_steps=4) is True
    assert (rank.switch.force, rank.switch.hysteresis, rank.switch.min_dwell_steps) == ("auto", 2, 4)
    assert set_state(rank.controller, speculative_disable_force_mode=7) is False
    assert messages(caplog, "refused speculative_disable_force_mode=7")


def test_internal_state_carries_the_live_state(rank):
    set_state(rank.controller, **{KEY: 3})
    rank.worker.forward_batch_generation(decode_batch(4))
    state = rank.controller.get_internal_state(GetInternalStateReq()).internal_state
    assert state[KEY] == 3
    assert state["speculative_disable_hysteresis"] == 1
    assert state["speculative_disable_force_mode"] == "auto"
    live = state["dynamic_speculation"]
    assert live["mode"] == "target_only" and live["threshold"] == 3 and live["active"] is True
    assert live["steps"] == {"speculative": 0, "target_only": 1}
    assert state["avg_spec_accept_length"] == 3.0  # SGLang's own entries are still there


def test_tp_ranks_that_disagree_after_a_set_turn_the_switch_off(rank, caplog, monkeypatch):
    """After a set, the ranks' live values are gathered (a gloo collective: the other rank is
    what one process cannot have, so the gather returns TP0's real encoded row and a TP1
    that kept the old threshold); a disagreement turns the switch off and TP0 answers false."""
    from server_control.sglang_patch import rank_agreement

    def gather(dyn, failure=None):
        mine = rank_agreement.encode_live(dyn.snapshot())
        return rank_agreement.decode_live([rank_agreement._pack(mine), rank_agreement._pack(dict(mine, threshold=5))])

    monkeypatch.setattr(rank_agreement, "gather_live", gather)
    assert set_state(rank.controller, **{KEY: 8}) is False
    assert messages(caplog, "NOT active") == [
        "Dynamic speculation disable NOT active: TP ranks disagree after /set_internal_state: "
        "TP1 threshold=5 (TP0: threshold=8); the switch is off on every rank"
    ]
    rank.worker.forward_batch_generation(decode_batch(32))
    assert rank.worker.speculative_num_steps == 3  # off: plain speculation at any batch
    live = rank.controller.get_internal_state(GetInternalStateReq()).internal_state["dynamic_speculation"]
    assert live["active"] is False and live["reason"].startswith("TP ranks disagree after")


def test_rank_without_an_eagle_worker_says_why(caplog):
    caplog.set_level(logging.INFO)
    gate._reported = None
    with get_context().override_server_args():
        scheduler = scheduler_for(None, SpeculativeAlgorithm.NONE)
        controller = SchedulerInternalStateController(scheduler=scheduler, record_step_time=False)
        assert messages(caplog, "NOT active") == [
            "Dynamic speculation disable NOT active: no speculative decoding on this server (--speculative-algorithm not set)"
        ]
        assert set_state(controller, **{KEY: 4}) is False
        assert messages(caplog, "refused")[0].startswith(
            f"Dynamic speculation: refused {KEY}=4: dynamic speculation disable is not active"
        )
        state = controller.get_internal_state(GetInternalStateReq()).internal_state
        assert state["dynamic_speculation"]["active"] is False
    gate._reported = None


def test_a_rank_whose_readback_raises_still_takes_part_in_the_gather(rank, monkeypatch):
    """SGLang's own get_internal_state failing on this rank must not leave the other ranks
    in the gather: the rank takes part (its failure is its row), then raises."""
    from server_control.sglang_patch import rank_agreement

    seen = []

    def gather(dyn, failure=None):
        seen.append(repr(failure))
        return []

    monkeypatch.setattr(rank_agreement, "gather_live", gather)

    def boom(state):
        raise RuntimeError("boom")

    monkeypatch.setattr(rank.controller, "_add_memory_usage", boom)
    with pytest.raises(RuntimeError, match="boom"):
        rank.controller.get_internal_state(GetInternalStateReq())
    assert seen == ["RuntimeError('boom')"]
