"""Exploration in the real patched EAGLEWorkerV2 decode path: the other mode runs now and
then at batches near N, by the simulator's own rule (protocol/explore.py), counted in the
cost curves per mode run; settable at start-up (the flag) and at runtime (the
internal-state controller), refused with the reason when out of range."""

import logging

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2  # noqa: E402, F401 - the patched worker class
from sglang.srt.managers.io_struct import SetInternalStateReq  # noqa: E402
from sglang.srt.managers.scheduler_components.internal_state import (  # noqa: E402
    SchedulerInternalStateController,
)
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

from server_control.protocol import decision, explore  # noqa: E402
from tests.sglang.conftest import lines  # noqa: E402
from tests.sglang.objects import Recorder, decode_batch, scheduler_for, server_info_entry, started_worker  # noqa: E402

SHARE = explore.SHARE_KEY
BATCHES = [3, 4, 5, 6, 5, 4] * 60  # around N=4: both sides of the boundary, 360 steps


def _run(worker, batches):
    """The mode each decode step ran in, read off the worker (steps 0 = target-only)."""
    ran = []
    for bs in batches:
        worker.forward_batch_generation(decode_batch(bs))
        ran.append(decision.TARGET_ONLY if worker.speculative_num_steps == 0 else decision.SPECULATIVE)
    return ran


def _reference(batches, threshold, share):
    """The simulator's rule, on its own switch and explorer (as sim/worker.py runs it)."""
    sw, ex, out = decision.SpecSwitch(threshold, 1, 0), explore.Explorer(share), []
    for bs in batches:
        sw.decide(bs)
        out.append(ex.mode(sw.mode, sw.steps[decision.SPECULATIVE] + sw.steps[decision.TARGET_ONLY], bs, threshold))
    return out


def _modes_at(batches, ran, batch):
    return {m for b, m in zip(batches, ran) if b == batch}


def _curve_steps(snapshot, mode, batch):
    rows = snapshot["cost_curves"]["modes"].get(mode, [])
    return sum(r[2] for r in rows if r[0] <= batch <= r[1])


def test_exploration_from_the_flag_runs_both_modes_near_n(publish, caplog):
    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0, **{SHARE: 0.1})
    worker = started_worker(server_args, Recorder())
    ran = _run(worker, BATCHES)
    assert ran == _reference(BATCHES, 4, 0.1)  # the simulator's rule, step for step
    for batch in (3, 4, 5, 6):  # each side of N=4 ran the other mode too
        assert _modes_at(BATCHES, ran, batch) == {decision.SPECULATIVE, decision.TARGET_ONLY}, batch
    snap = worker._dynspec.snapshot()
    flipped = sum(a != b for a, b in zip(ran, _reference(BATCHES, 4, 0.0)))  # against the rule alone
    assert snap["exploration"] == {"share": 0.1, "window": 3, "explored_steps": flipped}
    assert 0 < flipped < len(BATCHES) // 4
    # explored steps are counted in the mode they ran in: both curves exist at 3 to 6
    for batch in (3, 4, 5, 6):
        for mode in decision.MODES:
            assert _curve_steps(snap, mode, batch) > 0, (mode, batch)
    assert lines(caplog, "exploration share 0.1") != []


def test_without_exploration_each_batch_runs_one_mode(publish):
    """The negative control: share 0 (the default) leaves the rule alone."""
    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0)
    worker = started_worker(server_args, Recorder())
    ran = _run(worker, BATCHES)
    assert ran == _reference(BATCHES, 4, 0.0)
    # (4 and 5 run both modes by the hysteresis alone: 4 stays target-only above the low mark)
    assert _modes_at(BATCHES, ran, 3) == {decision.SPECULATIVE}
    assert _modes_at(BATCHES, ran, 6) == {decision.TARGET_ONLY}
    snap = worker._dynspec.snapshot()
    assert snap["exploration"]["explored_steps"] == 0
    assert _curve_steps(snap, decision.TARGET_ONLY, 3) == 0
    assert _curve_steps(snap, decision.SPECULATIVE, 6) == 0


def test_forced_mode_never_explores(publish):
    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_force_mode="speculative", **{SHARE: 0.1})
    worker = started_worker(server_args, Recorder())
    assert set(_run(worker, BATCHES)) == {decision.SPECULATIVE}


def test_the_share_is_set_at_runtime_and_refused_out_of_range(publish, caplog):
    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0)
    worker = started_worker(server_args, Recorder())
    controller = SchedulerInternalStateController(
        scheduler=scheduler_for(worker, SpeculativeAlgorithm.EAGLE3), record_step_time=False
    )
    caplog.set_level(logging.INFO)
    refused = controller.set_internal_state(SetInternalStateReq(server_args={SHARE: 0.5}))
    assert refused.updated is False
    assert lines(caplog, f"refused {SHARE}=0.5") == [
        f"Dynamic speculation: refused {SHARE}=0.5: exploration share must be 0..0.1, got 0.5"
    ]
    assert worker._dynspec.explorer.share == 0.0
    assert controller.set_internal_state(SetInternalStateReq(server_args={SHARE: 0.05})).updated is True
    assert lines(caplog, "exploration share changed") == ["Dynamic speculation: exploration share changed 0 -> 0.05"]
    ran = _run(worker, BATCHES)
    assert ran == _reference(BATCHES, 4, 0.05)
    entry = server_info_entry(worker)
    assert entry[SHARE] == 0.05
    assert entry["dynamic_speculation"]["exploration"]["share"] == 0.05


def test_the_flag_parses_and_refuses_out_of_range():
    from sglang.srt.server_args import prepare_server_args

    from tests.sglang.objects import require_patched_server_args

    require_patched_server_args()
    args = prepare_server_args(["--model-path", "dummy-model", "--speculative-disable-explore-share", "0.02"])
    assert args.speculative_disable_explore_share == 0.02
    with pytest.raises(SystemExit):
        prepare_server_args(["--model-path", "dummy-model", "--speculative-disable-explore-share", "0.3"])
