"""The real EAGLEWorkerV2 decode path picks the steps=0 state above N, the normal one at
or below it, and keeps draft-extend running while target-only."""
import logging

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402
from sglang.srt.runtime_context import get_context  # noqa: E402

from server_control.sglang_patch import gate  # noqa: E402
from server_control.sglang_patch import worker as patch_worker  # noqa: E402
from tests.sglang.objects import (  # noqa: E402
    Recorder, build_worker, decode_batch, require_patched_server_args)

SPEC = dict(speculative_algorithm="EAGLE3", speculative_eagle_topk=1,
            speculative_num_steps=3, speculative_num_draft_tokens=4)


@pytest.fixture
def publish(caplog):
    """Publish a real resolved ServerArgs (SGLang's own test helper) for the worker."""
    require_patched_server_args()
    caplog.set_level(logging.INFO)
    gate._reported = None  # one NOT-active line per process: start each test fresh
    gate._pending.clear()
    installed = []

    def _publish(**fields):
        override = get_context().override_server_args(**{**SPEC, **fields})
        server_args = override.install()
        installed.append(override)
        return server_args

    yield _publish
    for override in reversed(installed):
        override.restore()
    gate._reported = None


def started_worker(server_args, rec):
    worker = build_worker(ew.EAGLEWorkerV2, rec)
    worker._dynspec = patch_worker._init_state(worker, server_args, ew.EAGLEWorkerV2)
    worker.init_cuda_graphs()  # the patched real method
    return worker


def lines(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_the_worker_class_is_patched():
    cls = ew.EAGLEWorkerV2
    assert cls._specconsole_patched is True
    for name in ("__init__", "init_cuda_graphs", "activate_step_by_batch", "on_verify_complete_cpu"):
        assert getattr(cls, name).__wrapped__ is not None, name


def test_init_logs_the_line_and_builds_the_steps0_state(publish, caplog):
    server_args = publish(speculative_disable_batch_threshold=5)
    rec = Recorder()
    worker = started_worker(server_args, rec)
    assert lines(caplog, "Dynamic speculation disable enabled: ") == [
        "Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10"]
    assert "draft_init_cuda_graphs" in rec.calls  # SGLang's own init_cuda_graphs ran first
    assert rec.built == [(0, 1, None)]  # steps=0, one draft token, every decode graph bucket
    dyn = worker._dynspec
    assert dyn.active and dyn.target_only_state.speculative_num_steps == 0
    assert dyn.normal_state.speculative_num_steps == 3
    assert not lines(caplog, "NOT active")


def test_decode_steps_switch_between_normal_and_steps0_state(publish, caplog):
    server_args = publish(speculative_disable_batch_threshold=4,
                          speculative_disable_min_dwell_steps=0)
    rec = Recorder()
    worker = started_worker(server_args, rec)
    rec.take()
    speculative = ["draft", ("verify", 4, "SimpleNamespace"), ("draft_extend", 4)]
    target_only = [("verify", 1, "EagleVerifyInput"), ("draft_extend", 1)]
    expected = [(2, 3, speculative), (4, 3, speculative), (5, 0, target_only),
                (9, 0, target_only), (4, 0, target_only),  # 4 > resume mark 3: stays
                (3, 3, speculative), (1, 3, speculative)]
    for bs, steps, calls in expected:
        batch = decode_batch(bs)
        worker.forward_batch_generation(batch)  # SGLang's own decode path
        got = rec.take()
        assert worker.speculative_num_steps == steps, (bs, got)
        assert got == calls, (bs, got)
        runner = worker._target_worker.model_runner
        assert runner.attn_backend.name == f"target_attn[{steps}]"
        assert runner.decode_cuda_graph_runner == f"target_graphs[{steps}]"
    assert lines(caplog, "Dynamic speculation: switched to ") == [
        "Dynamic speculation: switched to target-only (decode batch 5 > threshold 4)",
        "Dynamic speculation: switched to speculative (decode batch 3 <= 3, threshold 4)"]
    snap = worker._dynspec.snapshot()
    assert snap["steps"] == {"speculative": 4, "target_only": 3}
    assert snap["switch_count"] == 2


def test_threshold_zero_never_disables(publish):
    server_args = publish()
    rec = Recorder()
    worker = started_worker(server_args, rec)
    for bs in (1, 64, 512):
        worker.forward_batch_generation(decode_batch(bs))
        assert worker.speculative_num_steps == 3
    assert rec.built == [(0, 1, None)]  # ready for a runtime threshold all the same


def test_tokens_are_counted_per_mode(publish):
    worker = started_worker(publish(speculative_disable_batch_threshold=2), Recorder())
    worker.on_verify_complete_cpu([2, 0, 3], batch_size=3)
    assert worker._dynspec.switch.tokens == {"speculative": 8, "target_only": 0}


def test_topk_above_one_is_refused_with_the_reason(publish, caplog):
    server_args = publish(speculative_eagle_topk=4, speculative_num_draft_tokens=8,
                          speculative_disable_batch_threshold=4,
                          speculative_disable_min_dwell_steps=0)
    rec = Recorder()
    worker = started_worker(server_args, rec)
    assert not worker._dynspec.active
    assert lines(caplog, "NOT active") == [
        "Dynamic speculation disable NOT active: speculative_eagle_topk=4 (only topk=1 is supported)"]
    assert rec.built == []
    worker.forward_batch_generation(decode_batch(32))
    assert worker.speculative_num_steps == 3  # untouched: plain speculation


def test_other_workers_built_on_eagle_are_refused(publish, caplog):
    from sglang.srt.speculative.standalone_worker_v2 import StandaloneWorkerV2
    server_args = publish(speculative_disable_batch_threshold=4)
    worker = build_worker(StandaloneWorkerV2, Recorder())
    dyn = patch_worker._init_state(worker, server_args, ew.EAGLEWorkerV2)
    assert not dyn.active
    assert lines(caplog, "NOT active") == [
        "Dynamic speculation disable NOT active: speculative worker StandaloneWorkerV2 is not "
        "EAGLEWorkerV2 (only EAGLE/EAGLE3 on the standard worker have the steps=0 target-only path)"]


def test_with_speculative_adaptive_the_rule_only_adds_target_only_above_n(publish):
    from types import SimpleNamespace

    from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController

    from tests.sglang.objects import runtime_state
    server_args = publish(speculative_disable_batch_threshold=4,
                          speculative_disable_min_dwell_steps=0)
    rec = Recorder()
    worker = build_worker(ew.EAGLEWorkerV2, rec)
    policy = SimpleNamespace(get_steps_for_batch=lambda bs: 1 if bs <= 2 else 3,
                             candidate_steps=[1, 3, 0], set_cuda_graph_bs=lambda bs: None,
                             cuda_graph_bs_for_step=lambda steps: None)
    controller = AdaptiveController(worker, policy)  # SGLang's own controller
    for steps in (1, 3, 0):
        controller.register(runtime_state(steps))
    worker.adaptive_controller = controller
    worker._draft_worker.speculative_num_draft_tokens = 4
    worker._dynspec = patch_worker._init_state(worker, server_args, ew.EAGLEWorkerV2)
    worker.init_cuda_graphs()
    assert rec.built == []  # the controller's steps=0 state is reused
    assert worker._dynspec.target_only_state is controller._states[0]
    for bs, steps in ((2, 1), (3, 3), (9, 0), (4, 0), (3, 3), (1, 1)):
        worker.activate_step_by_batch(bs)
        assert worker.speculative_num_steps == steps, bs
