"""Above the cold mark, the real EAGLEWorkerV2 decode path takes SGLang's own skip of
draft-extend at target-only steps; at or below it, and with the mark at 0, draft-extend
runs (the draft stays warm). The mark changes at runtime like N, and a step's mark never
leaks into the next forward."""

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402

from server_control.protocol import runtime_settings  # noqa: E402
from server_control.sglang_patch import cold_draft  # noqa: E402
from tests.sglang.objects import Recorder, decode_batch, started_worker  # noqa: E402

WARM = [("verify", 1, "EagleVerifyInput"), ("draft_extend", 1)]
COLD = [("verify", 1, "EagleVerifyInput"), ("stub_skipped_draft_extend", 1)]
SPECULATIVE = ["draft", ("verify", 4, "SimpleNamespace"), ("draft_extend", 4)]


@pytest.fixture
def recorded_stub(monkeypatch):
    """SGLang's stub fills zeroed device tensors (the device edge): recorded instead."""

    def stub(self, batch, batch_output):
        self._draft_worker.rec.calls.append(("stub_skipped_draft_extend", 1))

    monkeypatch.setattr(ew.EAGLEWorkerV2, "_stub_skipped_draft_extend", stub)
    monkeypatch.delenv(cold_draft.SGLANG_ENV, raising=False)


def _run(worker, rec, batches):
    out = []
    for bs in batches:
        worker.forward_batch_generation(decode_batch(bs))  # SGLang's own decode path
        out.append((bs, rec.take()))
    return out


def test_sglangs_read_of_the_variable_is_patched():
    assert cold_draft.patched()
    assert ew.envs.SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND.get() is False  # no step running: SGLang's own answer


def test_target_only_steps_above_the_mark_skip_draft_extend(publish, recorded_stub):
    server_args = publish(
        speculative_disable_batch_threshold=4,
        speculative_disable_min_dwell_steps=0,
        speculative_disable_cold_draft_above=6,
    )
    rec = Recorder()
    worker = started_worker(server_args, rec)
    worker._draft_worker.rec = rec
    rec.take()
    got = _run(worker, rec, [2, 5, 9, 7, 6, 5, 3])
    assert got == [
        (2, SPECULATIVE),
        (5, WARM),  # target-only at or below the mark: warm
        (9, COLD),
        (7, COLD),
        (6, WARM),
        (5, WARM),
        (3, SPECULATIVE),  # resumes (from warm steps here)
    ]
    snap = worker._dynspec.snapshot()
    assert snap["cold_draft_above"] == 6 and snap["cold_steps"] == 2
    assert snap["steps"] == {"speculative": 2, "target_only": 5}
    # a cold step ran its target forward and no draft-extend at all
    assert snap["forwards"]["target_only"]["target_eager"] == 5
    assert snap["forwards"]["target_only"]["draft_extend_eager"] == 3
    assert ew.envs.SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND.get() is False  # no mark outlives its step


def test_the_mark_changes_at_runtime_and_zero_keeps_the_draft_warm(publish, recorded_stub):
    server_args = publish(speculative_disable_force_mode="target_only")
    rec = Recorder()
    worker = started_worker(server_args, rec)
    worker._draft_worker.rec = rec
    rec.take()
    assert _run(worker, rec, [9]) == [(9, WARM)]  # the default: 0, warm at every batch
    switch = worker._dynspec.switch
    runtime_settings.apply(switch, runtime_settings.COLD_DRAFT, 8)
    assert _run(worker, rec, [9, 8]) == [(9, COLD), (8, WARM)]
    runtime_settings.apply(switch, runtime_settings.COLD_DRAFT, 0)
    assert _run(worker, rec, [9]) == [(9, WARM)]
    assert worker._dynspec.snapshot()["cold_steps"] == 1


def test_a_speculative_step_above_the_mark_drafts_as_always(publish, recorded_stub):
    server_args = publish(speculative_disable_force_mode="speculative", speculative_disable_cold_draft_above=2)
    rec = Recorder()
    worker = started_worker(server_args, rec)
    worker._draft_worker.rec = rec
    rec.take()
    assert _run(worker, rec, [9]) == [(9, SPECULATIVE)]
    assert worker._dynspec.snapshot()["cold_steps"] == 0


def test_a_bad_mark_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="speculative_disable_cold_draft_above must be >= 0, got -1"):
        runtime_settings.COLD_DRAFT.validate(-1)
    with pytest.raises(ValueError, match="must be an integer"):
        runtime_settings.COLD_DRAFT.validate("warm")


def test_sglang_without_the_variable_is_said_once_and_marks_nothing(caplog, monkeypatch):
    """A build that moved ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``: one line names it, and
    no step is marked cold (the worker asks ``patched()`` before it marks)."""
    monkeypatch.setattr(cold_draft, "_patched", [False])
    with caplog.at_level("WARNING", logger=cold_draft.logger.name):
        cold_draft.patch(object())
    assert [r.getMessage() for r in caplog.records] == [
        cold_draft.UNAVAILABLE_LINE.format(why=f"SGLang has no envs.{cold_draft.SGLANG_ENV}")
    ]
    assert not cold_draft.patched()
