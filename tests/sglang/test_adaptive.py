"""``--speculative-adaptive`` with the threshold, on SGLang's real AdaptiveController,
AdaptiveSpeculativeParams, EAGLEWorkerV2.init_cuda_graphs / apply_runtime_state and the
real result processor (``_resolve_spec_v2_tokens``): at or below N the controller decides
the step count; the steps the patch forces target-only never feed it, also when their
results are settled one step late (the overlap scheduler); the snapshot reports the step
count the worker really runs."""

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import torch  # noqa: E402
from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor  # noqa: E402
from sglang.srt.managers.utils import GenerationBatchResult  # noqa: E402
from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController  # noqa: E402
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams  # noqa: E402

from server_control.sglang_patch import worker as patch_worker  # noqa: E402
from tests.sglang.objects import Recorder, build_worker, decode_batch  # noqa: E402

N = 4  # the threshold
FAST = {"warmup_batches": 0, "update_interval": 1, "ema_alpha": 1.0}


class Rank:
    """A worker with SGLang's adaptive controller, stepped and settled like the scheduler."""

    def __init__(self, publish, tmp_path, tiers: list[int]) -> None:
        import sglang.srt.speculative.eagle_worker_v2 as ew

        cfg = tmp_path / "adaptive.json"
        cfg.write_text(json.dumps({"1": {"candidate_steps": tiers, **FAST}}))
        server_args = publish(
            speculative_adaptive=True,
            speculative_adaptive_config=str(cfg),
            disable_cuda_graph=True,
            speculative_disable_batch_threshold=N,
            speculative_disable_min_dwell_steps=0,
        )
        self.rec = Recorder()
        self.worker = w = build_worker(ew.EAGLEWorkerV2, self.rec)
        w.adaptive_controller = AdaptiveController(w, AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(cfg)))
        w._dynspec = patch_worker.init_state(w, server_args, ew.EAGLEWorkerV2)
        w.verify = self._verify
        w.init_cuda_graphs()  # SGLang's (registers + builds the tiers), then the patch's
        self.accepted = 0  # drafts each request gets accepted in the next verify
        self.processor = object.__new__(SchedulerBatchResultProcessor)
        object.__setattr__(self.processor, "model_worker", w)
        object.__setattr__(
            self.processor, "metrics_reporter", SimpleNamespace(snapshot_spec_decode_metrics=lambda batch, result: None)
        )

    @property
    def slot(self):
        return self.worker.adaptive_controller.params._slots[1]

    def _verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
        n, k = batch.seq_lens.shape[0], self.worker.speculative_num_draft_tokens
        accepted = 0 if k == 1 else min(self.accepted, k - 1)
        return GenerationBatchResult(
            next_token_ids=torch.zeros(n * k, dtype=torch.int64),
            accept_lens=torch.full((n,), accepted + 1, dtype=torch.int64),
            speculative_num_draft_tokens=k,
            new_seq_lens=batch.seq_lens + 1,
        )

    def forward(self, bs: int):
        """One decode step through SGLang's forward_batch_generation; its result."""
        return bs, self.worker.forward_batch_generation(decode_batch(bs))

    def settle(self, step) -> None:
        """The scheduler processing that step's result (SGLang's own code)."""
        bs, result = step
        reqs = [SimpleNamespace(grammar=None, is_retracted=True, finished=lambda: True)] * bs
        self.processor._resolve_spec_v2_tokens(result, SimpleNamespace(reqs=reqs, has_grammar=False))

    def run(self, bs: int, accepted: int) -> None:
        self.accepted = accepted
        self.settle(self.forward(bs))


def test_without_a_zero_tier_the_controllers_choice_stands_at_or_below_n(publish, tmp_path):
    rank = Rank(publish, tmp_path, tiers=[1, 3])
    w = rank.worker
    assert rank.rec.built == [(1, 2, None), (0, 1, None)]  # SGLang's tier 1, then our steps=0
    assert w._dynspec.normal_state is None  # the controller owns the speculative states
    rank.run(2, accepted=0)  # nothing accepted: the controller drops to 1 step
    assert rank.slot.current_steps == 1 and w.speculative_num_steps == 1
    for _ in range(3):
        rank.run(2, accepted=0)  # at or below N: the controller's choice is not reverted
        assert w.speculative_num_steps == 1
    rank.run(6, accepted=2)  # above N: the patch's steps=0 state
    assert w.speculative_num_steps == 0
    rank.run(2, accepted=0)
    assert w.speculative_num_steps == 1  # back to what the controller chose
    rank.run(2, accepted=1)  # every draft accepted: the controller probes 3 steps, its call
    assert rank.slot.current_steps == 3 and w.speculative_num_steps == 3


def test_forced_steps_never_feed_the_controller_even_settled_a_step_late(publish, tmp_path):
    rank = Rank(publish, tmp_path, tiers=[0, 1, 3])
    w = rank.worker
    assert (0, 1, None) in rank.rec.built and rank.rec.built.count((0, 1, None)) == 1
    assert w._dynspec.target_only_state is w.adaptive_controller._states[0]  # reused
    rank.run(2, accepted=2)  # every draft accepted: stays at 3 steps
    assert rank.slot.current_steps == 3 and rank.slot.ema_accept_len == 2.0
    forced = [rank.forward(6) for _ in range(3)]  # overlap: results not settled yet
    assert w.speculative_num_steps == 0
    for step in forced[:-1]:
        rank.settle(step)
    rank.accepted = 2
    back = rank.forward(2)  # the batch shrank: speculative again before the last settle
    assert w.speculative_num_steps == 3
    rank.settle(forced[-1])  # a forced step's zero accepts, settled while speculative
    rank.settle(back)
    assert rank.slot.ema_accept_len == 2.0 and rank.slot.current_steps == 3
    assert w.speculative_num_steps == 3
    snap = w._dynspec.snapshot()
    assert snap["mode"] == "speculative" and snap["num_steps"] == 3
    assert snap["steps"] == {"speculative": 2, "target_only": 3}
    assert snap["tokens"] == {"speculative": 2 * 3 * 2, "target_only": 3 * 6}
    assert snap["verifies"] == 4 and snap["accepted_drafts"] == 8  # speculative steps only


def test_the_snapshot_reports_the_controllers_own_zero_steps(publish, tmp_path):
    rank = Rank(publish, tmp_path, tiers=[0, 1, 3])
    for _ in range(2):
        rank.run(2, accepted=0)  # genuine zero acceptance at or below N: 3 -> 1 -> 0
    rank.run(2, accepted=0)
    snap = rank.worker._dynspec.snapshot()
    assert rank.slot.current_steps == 0
    assert snap["mode"] == "speculative" and snap["num_steps"] == 0  # not "speculating"


def test_a_pruned_zero_tier_is_told(publish, tmp_path):
    """SGLang captures its steps=0 tier only for the graph buckets whose tier can reach 0;
    the patch reuses it anyway (never a second full state: SGLang's runner pads a batch up
    to the next captured bucket) and says which buckets it has. The buckets are SGLang's
    public ones (``get_exec().graph.cuda_graph_bs_decode``, what init_cuda_graphs hands the
    controller) against ``cuda_graph_bs_for_step(0)``."""
    buckets = [1, 2, 4, 8, 16, 32, 64]
    publish(cuda_graph_bs_decode=buckets)
    params = AdaptiveSpeculativeParams(initial_steps=3)  # SGLang's default tiers
    params.set_cuda_graph_bs(buckets)
    assert params.cuda_graph_bs_for_step(0) == [8, 16, 32, 64]
    assert not patch_worker._covers_every_bucket(SimpleNamespace(params=params))
    cfg = tmp_path / "zero_everywhere.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [0, 1]}, "8": {"candidate_steps": [0]}}))
    everywhere = AdaptiveSpeculativeParams(initial_steps=1, cfg_path=str(cfg))
    everywhere.set_cuda_graph_bs(buckets)
    assert everywhere.cuda_graph_bs_for_step(0) == buckets
    assert patch_worker._covers_every_bucket(SimpleNamespace(params=everywhere))
    params.set_cuda_graph_bs(None)  # no buckets handed: SGLang built its 0 for every bucket
    assert patch_worker._covers_every_bucket(SimpleNamespace(params=params))
    publish(cuda_graph_bs_decode=[1, 2, 4, 8])  # another list than the controller's
    assert not patch_worker._covers_every_bucket(SimpleNamespace(params=everywhere))
    assert patch_worker._pruned_line([8, 16, 32, 64]).endswith(
        "batch sizes [8, 16, 32, 64] only: a target-only batch pads up to the next of them "
        "(SGLang's padding) and runs eager above 64 (reused, not rebuilt)"
    )


def test_a_pruned_zero_tier_is_reused_not_built_twice(publish, tmp_path, caplog):
    """With graph buckets handed and a steps=0 tier only for batches >= 8, the target-only
    state is SGLang's own (captured for [8]): no second full state is built."""
    import sglang.srt.speculative.eagle_worker_v2 as ew

    cfg = tmp_path / "pruned.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [1, 3], **FAST}, "8": {"candidate_steps": [0, 1], **FAST}}))
    server_args = publish(
        speculative_adaptive=True,
        speculative_adaptive_config=str(cfg),
        disable_cuda_graph=False,
        cuda_graph_bs_decode=[1, 2, 4, 8],
        speculative_disable_batch_threshold=N,
    )
    rec = Recorder()
    w = build_worker(ew.EAGLEWorkerV2, rec)
    w.adaptive_controller = AdaptiveController(w, AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(cfg)))
    w._dynspec = patch_worker.init_state(w, server_args, ew.EAGLEWorkerV2)
    w.init_cuda_graphs()
    zero_builds = [b for b in rec.built if b[0] == 0]
    assert zero_builds == [(0, 1, [8])], rec.built  # SGLang's pruned tier, and nothing more
    assert w._dynspec.target_only_state is w.adaptive_controller._states[0]
    assert any("CUDA graphs for batch sizes [8] only" in r.getMessage() for r in caplog.records)
