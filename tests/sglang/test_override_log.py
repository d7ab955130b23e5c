"""Bounded state: every switch goes through SGLang's apply_runtime_state, which appends to
the runtime-context overrides log that every /server_info replays. 10,000 forced flips and
1,000 runtime changes leave the log (and so the replay per poll) flat, and the readback
still shows the live values."""

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from sglang.srt.managers.io_struct import SetInternalStateReq  # noqa: E402
from sglang.srt.runtime_context import get_context  # noqa: E402

from server_control.sglang_patch import overrides  # noqa: E402
from tests.sglang.objects import Recorder, server_info_entry, started_worker  # noqa: E402

KEY = "speculative_disable_batch_threshold"


def flip(worker, times: int) -> None:
    """Alternate the batch across N=4 with no dwell: one switch per decode step."""
    for i in range(times):
        worker.activate_step_by_batch(9 if i % 2 == 0 else 1)


def test_compacted_replays_to_the_same_dict():
    log = [("a", {"x": 1, "y": 2}), ("b", {"x": 3}), ("c", {"z": 4, "y": 5}), ("b", {"x": 6})]
    assert overrides.compacted(log) == [("c", {"z": 4, "y": 5}), ("b", {"x": 6})]
    replay = lambda entries: {k: v for _, f in entries for k, v in f.items()}  # noqa: E731
    assert replay(overrides.compacted(log)) == replay(log)
    assert log[0] == ("a", {"x": 1, "y": 2})  # pure: the input is untouched


def test_ten_thousand_flips_leave_the_log_and_the_readback_flat(publish, caplog):
    caplog.set_level("WARNING")  # 20,000 switch lines would only fill memory here
    worker = started_worker(publish(**{KEY: 4, "speculative_disable_min_dwell_steps": 0}), Recorder())
    log = get_context()._overrides_log
    flip(worker, 100)
    after_100 = len(get_context()._overrides_log)
    flip(worker, 10_000)
    assert worker._dynspec.switch.snapshot()["switch_count"] == 10_100
    assert len(get_context()._overrides_log) == after_100 <= 3, get_context().overrides_log()
    assert len(log) <= 3
    state = server_info_entry(worker)
    assert state["speculative_num_steps"] == worker.speculative_num_steps == 3
    flip(worker, 1)  # one more: target-only, and the readback follows
    assert server_info_entry(worker)["speculative_num_steps"] == 0


def test_runtime_changes_leave_the_log_flat(publish):
    from sglang.srt.managers.scheduler_components.internal_state import SchedulerInternalStateController
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from tests.sglang.objects import scheduler_for

    worker = started_worker(publish(**{KEY: 4}), Recorder())
    controller = SchedulerInternalStateController(
        scheduler=scheduler_for(worker, SpeculativeAlgorithm.EAGLE3), record_step_time=False
    )
    for value in range(1, 1001):
        assert controller.set_internal_state(SetInternalStateReq(server_args={KEY: value})).updated
    assert len(get_context()._overrides_log) <= 2, get_context().overrides_log()
    assert get_context().config_leaf(KEY) == 1000
    assert server_info_entry(worker)[KEY] == 1000
