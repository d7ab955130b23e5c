"""The real EAGLEWorkerV2 decode path picks the steps=0 state above N, the normal one at
or below it, and keeps draft-extend running while target-only."""

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402

from tests.sglang.conftest import lines  # noqa: E402
from tests.sglang.objects import Recorder, decode_batch, started_worker  # noqa: E402


def test_the_worker_class_is_patched():
    cls = ew.EAGLEWorkerV2
    assert cls._specconsole_patched is True
    for name in (
        "__init__",
        "init_cuda_graphs",
        "activate_step_by_batch",
        "on_verify_complete_cpu",
        "forward_batch_generation",
        "apply_runtime_state",
    ):
        assert getattr(cls, name).__wrapped__ is not None, name


def test_init_logs_the_line_and_builds_the_steps0_state(publish, caplog):
    server_args = publish(speculative_disable_batch_threshold=5)
    rec = Recorder()
    worker = started_worker(server_args, rec)
    assert lines(caplog, "Dynamic speculation disable enabled: ") == [
        "Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10"
    ]
    assert "draft_init_cuda_graphs" in rec.calls  # SGLang's own init_cuda_graphs ran first
    assert rec.built == [(0, 1, None)]  # steps=0, one draft token, every decode graph bucket
    dyn = worker._dynspec
    assert dyn.active and dyn.target_only_state.speculative_num_steps == 0
    assert dyn.normal_state.speculative_num_steps == 3
    assert not lines(caplog, "NOT active")


def test_decode_steps_switch_between_normal_and_steps0_state(publish, caplog):
    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0)
    rec = Recorder()
    worker = started_worker(server_args, rec)
    rec.take()
    speculative = ["draft", ("verify", 4, "SimpleNamespace"), ("draft_extend", 4)]
    target_only = [("verify", 1, "EagleVerifyInput"), ("draft_extend", 1)]
    expected = [
        (2, 3, speculative),
        (4, 3, speculative),
        (5, 0, target_only),
        (9, 0, target_only),
        (4, 0, target_only),  # 4 > resume mark 3: stays
        (3, 3, speculative),
        (1, 3, speculative),
    ]
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
        "Dynamic speculation: switched to speculative (decode batch 3 <= 3, threshold 4)",
    ]
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


def _timed_steps(worker) -> int:
    snap = worker._dynspec.curves.snapshot()
    return sum(row[2] for rows in snap["modes"].values() for row in rows)


def test_a_prefill_between_decode_steps_is_not_timed_in_the_cost_curves(publish):
    """Decode-only cost curves (issue 32 item 6): a decode step's time is the interval to the
    next decode step, so a prefill between them was charged to it. On the real crossover
    pair that made explored target-only steps (each right after a speculative step, whose
    finished requests' prefills land after the next step) look slower than forced ones."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    server_args = publish(speculative_disable_batch_threshold=8, speculative_disable_min_dwell_steps=0)
    worker = started_worker(server_args, Recorder())
    worker._forward_prefill_batch = lambda batch, *args, **kwargs: "prefilled"  # SGLang's own prefill: not here
    extend = decode_batch(2)
    extend.forward_mode = ForwardMode.EXTEND
    for batch in (decode_batch(4), decode_batch(4), extend, decode_batch(4), decode_batch(4)):
        worker.forward_batch_generation(batch)
    assert _timed_steps(worker) == 2  # the intervals 1->2 and 3->4; 2->3 held the prefill
    mixed = decode_batch(3)
    mixed.is_extend_in_batch = True  # a mixed chunk (--enable-mixed-chunk): prefills too
    worker.forward_batch_generation(mixed)
    worker.forward_batch_generation(decode_batch(4))
    assert _timed_steps(worker) == 2
    worker.forward_batch_generation(decode_batch(4))
    assert _timed_steps(worker) == 3
