"""Target-only steps skip draft-extend's lm_head and argmax; the step that resumes
speculation computes them (``EagleDraftWorker`` of ``eagle_worker_v2``).

While the patch forces a step target-only, SGLang still runs draft-extend after it (the
draft KV must stay warm: skipping it leaves KV holes a real EAGLE-3 draft reads), and
draft-extend ends with the draft's lm_head over every request and an argmax: the first
draft token of the NEXT speculative step, which a target-only step never reads. So:

  * ``_draft_extend_for_decode`` of a step the patch forced target-only runs with the
    draft model's ``LogitsProcessor._get_logits`` answering a one-column zero tensor
    (no lm_head matmul, an argmax over one column), and marks the draft input it
    returns ``_specconsole_head_pending``. The draft forward, its KV writes and the
    hidden states carried to the next step are SGLang's own.
  * ``draft`` (the first speculative step after target-only) finds the mark on
    ``batch.spec_info`` and computes what draft-extend would have: the draft model's
    final norm over the carried pre-norm hidden states, its lm_head, the argmax (top-1,
    probability 1.0), for every request of the batch (requests admitted meanwhile carry
    their prefill's hidden states, for which the same computation gives their top-1).
    Filtering and merging a batch keep the draft input object, and so the mark.

Only where that is the whole story, checked once per worker (``eligible``): topk 1, no
rejection sampling, no draft-extend CUDA graph (the graph computes lm_head inside it), no
overlap scheduler (its future map rebuilds the draft input each step and would drop the
mark), one pipeline stage, an unsharded draft lm_head of a model with ``model.norm``.
Elsewhere, and with ``SPECCONSOLE_LAZY_DRAFT_HEAD=0`` (a benchmark arm), draft-extend runs as
SGLang wrote it. Greedy and sampled outputs cannot change
either way: drafts only decide how many tokens a verify accepts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import ModuleType

from server_control.sglang_patch.checked_once import checked_once
from server_control.sglang_patch.sglang_shapes import DraftModel, EagleDraftInput, EagleDraftWorker, Tensor

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")
ON_LINE = "Dynamic speculation: target-only steps skip draft-extend's lm_head and argmax (computed on resuming)"
OFF_LINE = "Dynamic speculation: target-only steps keep draft-extend's lm_head ({why})"
ENV = "SPECCONSOLE_LAZY_DRAFT_HEAD"  # "0": keep the head (an A/B arm for benchmarks)
PENDING = "_specconsole_head_pending"
_skip: list[bool] = [False]
_counts = {"skipped": 0, "resumed": 0}


def counts() -> dict[str, int]:
    """Target-only draft-extends whose lm_head was skipped; resumes that computed it."""
    return dict(_counts)


def eligible(draft_worker: EagleDraftWorker) -> bool:
    """Whether skipping the head is exact bookkeeping for this draft worker (see above)."""

    def checks() -> tuple[tuple[str, bool], ...]:
        args = draft_worker.server_args
        model = draft_worker.draft_runner.model
        head = getattr(model, "lm_head", None)
        weight = getattr(head, "weight", None)
        return (
            (f"{ENV}=0", os.environ.get(ENV, "1") != "0"),
            ("topk > 1", draft_worker.topk == 1),
            ("rejection sampling", not getattr(args, "speculative_use_rejection_sampling", False)),
            ("draft-extend CUDA graph", draft_worker.cuda_graph_runner_for_draft_extend is None),
            ("overlap scheduler", bool(getattr(args, "disable_overlap_schedule", False))),
            ("pipeline stages", int(getattr(args, "pp_size", 1) or 1) == 1),
            ("tensor parallel draft lm_head", int(getattr(args, "tp_size", 1) or 1) == 1),
            ("DSA top-k seeding", not getattr(draft_worker, "seed_dsa_topk_from_draft_extend", False)),
            (
                "draft model layout",
                weight is not None and hasattr(getattr(model, "model", None), "norm") and hasattr(model, "logits_processor"),
            ),
        )

    return checked_once(draft_worker, "_specconsole_lazy_head", checks, ON_LINE, OFF_LINE)


def head_logits(model: DraftModel, hidden: Tensor) -> Tensor:
    """The draft's next-token logits from carried (pre-norm) hidden states."""
    import torch

    inner = model.model
    normed = hidden if getattr(inner, "norm_output", False) else inner.norm(hidden)
    weight = model.lm_head.weight
    cols = int(getattr(model.lm_head, "org_vocab_size", weight.shape[0]) or weight.shape[0])
    return torch.matmul(normed.to(weight.dtype), weight.t())[:, :cols]


def fill_pending(draft_worker: EagleDraftWorker, spec_info: EagleDraftInput | None) -> None:
    """Compute the top-1 a skipped head left out (the resume step), in place."""
    import torch

    if spec_info is None or not getattr(spec_info, PENDING, False):
        return
    hidden = spec_info.hidden_states
    if hidden is not None and hidden.shape[0] > 0:
        logits = head_logits(draft_worker.draft_runner.model, hidden)
        index = torch.argmax(logits, dim=-1, keepdim=True)
        spec_info.topk_index = index
        spec_info.topk_p = torch.ones_like(index, dtype=torch.float32)
    setattr(spec_info, PENDING, False)
    _counts["resumed"] += 1


def patch(module: ModuleType, step_forced: Callable[[], bool]) -> None:
    """Wrap ``module.EagleDraftWorker`` (``step_forced()``: whether the patch forced the
    current decode step target-only) and the LogitsProcessor's ``_get_logits``."""
    cls = module.EagleDraftWorker
    if getattr(cls, "_specconsole_lazy_head_patched", False):
        return
    orig_extend = cls._draft_extend_for_decode
    orig_draft = cls.draft

    def _draft_extend_for_decode(
        self: EagleDraftWorker, batch: object, batch_result: object, *args: object, **kwargs: object
    ) -> object:
        if not (step_forced() and eligible(self)):
            return orig_extend(self, batch, batch_result, *args, **kwargs)
        _skip[0] = True
        try:
            out = orig_extend(self, batch, batch_result, *args, **kwargs)
        finally:
            _skip[0] = False
        nxt = getattr(batch_result, "next_draft_input", None)
        if nxt is not None:
            setattr(nxt, PENDING, True)
            _counts["skipped"] += 1
        return out

    def draft(self: EagleDraftWorker, batch: object, *args: object, **kwargs: object) -> object:
        fill_pending(self, getattr(batch, "spec_info", None))
        return orig_draft(self, batch, *args, **kwargs)

    cls._draft_extend_for_decode = _draft_extend_for_decode
    cls.draft = draft
    cls._specconsole_lazy_head_patched = True
    _patch_logits(module)


def _patch_logits(module: ModuleType) -> None:
    from sglang.srt.layers.logits_processor import LogitsProcessor

    if getattr(LogitsProcessor, "_specconsole_lazy_head_patched", False):
        return
    orig = LogitsProcessor._get_logits

    def _get_logits(self: object, hidden_states: Tensor, *args: object, **kwargs: object) -> Tensor:
        if _skip[0]:
            return hidden_states.new_zeros((hidden_states.shape[0], 1))
        return orig(self, hidden_states, *args, **kwargs)

    LogitsProcessor._get_logits = _get_logits
    LogitsProcessor._specconsole_lazy_head_patched = True
