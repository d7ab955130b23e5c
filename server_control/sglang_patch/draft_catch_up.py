"""Cold target-only steps keep what the draft's extend would have read; one extend catches the
draft up before speculation resumes.

A target-only step marked cold (cold_draft.py) skips the draft's extend: SGLang's
``_stub_skipped_draft_extend`` leaves the draft's KV cache without the step's position and
the next draft input zeroed. A request that lives through a cold stretch is then proposed
for worse until it ends (the positions the draft attends over are missing), and the first
speculative step proposes from zeros. Here each cold step keeps, per request, the row the
extend would have run: the target's captured hidden state at the step's position and the
token at it (one copy of the step's rows, as SGLang may reuse its buffers). Then, at the step that
resumes speculation (run target-only one more step: its verify adds the last row), and
whenever the rows kept reach ``KEEP_ROWS`` (a bound on what is kept, and on the extend's
size: no larger than a prefill chunk), one draft extend runs over every
request's kept rows with SGLang's own prefill path (``EagleDraftWorker.
_draft_extend_for_prefill``: a ragged extend of n rows a request from its committed prefix,
the tokens rotated as after a prefill). It writes the draft KV at each kept position, as
the skipped extends would have (an EAGLE-3 draft is one layer: a position's K and V depend on
its own row only), and gives the next draft input from each request's last row. So the
draft resumes warm, and the extends of a cold stretch cost one ragged forward instead of one
forward a step.

Once no request of a decode batch holds kept rows (they ended), nothing is pending: no step
catches up for them. Rows that are not the contiguous run ending at the step's position (a request retracted and
prefilled again, an explored speculative step between) are dropped, as a cold step drops
them today. Under the overlap scheduler the catch-up's draft input is what the scheduler
relays to the next step (its future map stashes the step's ``next_draft_input`` after the
forward returns), as SGLang's own extend's is. Only where that is the whole story
(``eligible``, checked once per worker, the reasons logged): topk 1, no rejection sampling,
one pipeline stage, and a batch that carries its CPU sequence lengths (said once where one
does not). Elsewhere, and with ``SPECCONSOLE_COLD_CATCH_UP=0`` (a benchmark arm), a cold
step is SGLang's skip alone. Outputs cannot change either way: drafts only decide how many
tokens a verify accepts.
"""

from __future__ import annotations

import copy
import logging
import os
from types import ModuleType

from server_control.sglang_patch.checked_once import checked_once
from server_control.sglang_patch.sglang_shapes import EagleWorkerV2, GenerationBatchResult, ScheduleBatch, Tensor

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")
ENV = "SPECCONSOLE_COLD_CATCH_UP"  # "0": a cold step skips the extend for good (a benchmark arm)
ON_LINE = "Dynamic speculation: cold target-only steps keep the draft's rows; one extend catches it up before speculation resumes"
OFF_LINE = "Dynamic speculation: cold target-only steps skip the draft's extend for good ({why})"
FAILED_LINE = "Dynamic speculation: the draft's catch-up failed ({why}); cold steps skip the draft's extend from now on"
ROWS = "_specconsole_cold_rows"  # on each SGLang Req: [(position, token tensor (1,), hidden tensor (1, d)), ...]
KEEP_ROWS = 2048  # rows kept before a cold step catches up anyway (the extend: at most this + a batch)

_state = {"pending": False, "rows": 0, "broken": False, "unreadable": False}
_counts = {"kept": 0, "caught_up": 0, "rows": 0, "dropped": 0}


def counts() -> dict[str, int]:
    """Rows kept by cold steps, catch-up extends run, rows they wrote, rows dropped."""
    return dict(_counts)


def eligible(worker: EagleWorkerV2) -> bool:
    """Whether keeping rows and catching up is exact bookkeeping for this worker (see above)."""

    def checks() -> tuple[tuple[str, bool], ...]:
        draft = worker._draft_worker
        assert draft is not None  # refusals.pipeline: a worker without a draft is never patched for
        args = draft.server_args
        return (
            (f"{ENV}=0", os.environ.get(ENV, "1") != "0"),
            ("topk > 1", draft.topk == 1),
            ("rejection sampling", not getattr(args, "speculative_use_rejection_sampling", False)),
            ("pipeline stages", int(getattr(args, "pp_size", 1) or 1) == 1),
            ("no prefill draft-extend", callable(getattr(draft, "_draft_extend_for_prefill", None))),
        )

    return checked_once(worker, "_specconsole_catch_up", checks, ON_LINE, OFF_LINE)


def pending() -> bool:
    """Rows kept since the last catch-up (the next step that is not cold must catch up)."""
    return bool(_state["pending"]) and not _state["broken"]


def due(batch: int) -> bool:
    """A cold step of ``batch`` requests that should catch up anyway: with its own rows, the
    rows kept since the last catch-up would reach KEEP_ROWS."""
    return pending() and _state["rows"] + batch >= KEEP_ROWS


class Capture:
    """What a decode step's catch-up needs from its batch, read before SGLang's forward
    (the verify reads the same): the requests, their positions, the input tokens."""

    __slots__ = ("reqs", "positions", "tokens")

    def __init__(self, reqs: list[object], positions: list[int], tokens: Tensor) -> None:
        self.reqs = reqs
        self.positions = positions
        self.tokens = tokens


def capture(batch: object) -> Capture | None:  # SGLang's ScheduleBatch, read with getattr
    """Before a decode forward: None when it cannot be kept (no CPU lengths, no bonus tokens)."""
    if _state["broken"]:
        return None
    spec = getattr(batch, "spec_info", None)
    tokens = getattr(spec, "bonus_tokens", None)
    lens = getattr(batch, "seq_lens_cpu", None)
    reqs = getattr(batch, "reqs", None)
    if tokens is None or lens is None or not reqs:
        if not _state["unreadable"]:
            _state["unreadable"] = True
            missing = "bonus tokens" if tokens is None else "CPU sequence lengths" if lens is None else "requests"
            logger.info(OFF_LINE.format(why=f"a decode batch without its {missing}"))
        return None
    if _state["pending"] and not any(ROWS in vars(req) for req in reqs):
        _state["pending"], _state["rows"] = False, 0  # the requests that kept rows have all ended
    return Capture(list(reqs), [int(x) for x in lens.tolist()], tokens)


def _rows(out: GenerationBatchResult, cap: Capture) -> tuple[Tensor, Tensor] | None:
    """The step's hidden states and next tokens, one row a request, or None (another shape)."""
    hidden = getattr(getattr(out, "logits_output", None), "hidden_states", None)
    nxt = getattr(out, "next_token_ids", None)
    bs = len(cap.reqs)
    if hidden is None or nxt is None or hidden.shape[0] != bs or nxt.reshape(-1).shape[0] != bs:
        return None
    return hidden, nxt.reshape(-1)


def keep(out: GenerationBatchResult, cap: Capture) -> None:
    """After a cold step's verify: keep each request's row (position, token, hidden state)."""
    rows = _rows(out, cap)
    if rows is None:
        _broken("a cold step's verify output is not one row a request")
        return
    hidden, tokens = rows[0].clone(), cap.tokens.clone()  # SGLang may reuse its buffers next step
    for i, req in enumerate(cap.reqs):
        kept = vars(req).setdefault(ROWS, [])
        kept.append((cap.positions[i], tokens[i : i + 1], hidden[i : i + 1]))
    _counts["kept"] += len(cap.reqs)
    _state["pending"] = True
    _state["rows"] += len(cap.reqs)


def _run(req: object, position: int) -> list[tuple[int, Tensor, Tensor]]:
    """The request's kept rows that end right before ``position``, contiguous; the rest dropped."""
    kept = vars(req).pop(ROWS, None) or []
    run: list[tuple[int, Tensor, Tensor]] = []
    expect = position - 1
    for row in reversed(kept):
        if row[0] != expect:
            break
        run.append(row)
        expect -= 1
    _counts["dropped"] += len(kept) - len(run)
    run.reverse()
    return run


def catch_up(worker: EagleWorkerV2, module: ModuleType, batch: ScheduleBatch, out: GenerationBatchResult, cap: Capture) -> None:
    """At a cold-marked step that catches up: one extend of every request's kept rows and
    this step's row; its result is the next draft input (SGLang's stub is replaced)."""
    try:
        _catch_up(worker, module, batch, out, cap)
    except Exception as exc:  # noqa: BLE001 - never stop serving: the draft stays cold, as SGLang's skip leaves it
        _broken(repr(exc))
    finally:
        _state["pending"] = False
        _state["rows"] = 0


def _catch_up(worker: EagleWorkerV2, module: ModuleType, batch: ScheduleBatch, out: GenerationBatchResult, cap: Capture) -> None:
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    rows = _rows(out, cap)
    if rows is None:
        raise RuntimeError("the step's verify output is not one row a request")
    hidden, nxt = rows
    tokens: list[Tensor] = []
    states: list[Tensor] = []
    lens: list[int] = []
    for i, req in enumerate(cap.reqs):
        run = _run(req, cap.positions[i])
        tokens.extend(r[1] for r in run)
        states.extend(r[2] for r in run)
        tokens.append(cap.tokens[i : i + 1])
        states.append(hidden[i : i + 1])
        lens.append(len(run) + 1)
    lens_cpu = batch.seq_lens_cpu
    assert lens_cpu is not None  # capture() keeps none without it
    ends = [p + 1 for p in cap.positions]  # each request's length with this step's row
    prefix = [e - n for e, n in zip(ends, lens)]
    pool = batch.req_to_token_pool.req_to_token
    rpi = batch.req_pool_indices.to(torch.int64)
    rows_t = torch.repeat_interleave(rpi, torch.tensor(lens, device=rpi.device))
    cols = torch.tensor([c for s, e in zip(prefix, ends) for c in range(s, e)], dtype=torch.int64, device=rpi.device)

    seq_cpu = torch.tensor(ends, dtype=lens_cpu.dtype)
    seq = seq_cpu.to(device=batch.seq_lens.device, dtype=batch.seq_lens.dtype)
    ext = copy.copy(batch)  # a shallow copy: the decode batch itself is left as it is
    fields = vars(ext)
    fields.update(
        forward_mode=ForwardMode.EXTEND,
        input_ids=torch.cat(tokens).to(batch.input_ids.dtype if batch.input_ids is not None else torch.int64),
        extend_lens=lens,
        prefix_lens=prefix,
        extend_num_tokens=sum(lens),
        extend_logprob_start_lens=list(lens),
        return_logprob=False,
        extend_input_logprob_token_ids=None,
        decoding_reqs=None,
        chunked_req_next_prompt_token=None,
        input_embeds=None,
        seq_lens_cpu=seq_cpu,
        seq_lens=seq,
        seq_lens_sum=int(sum(ends)),
        out_cache_loc=pool[rows_t, cols].to(torch.int64),
        spec_info=None,
    )
    if fields.get("orig_seq_lens") is not None:
        fields["orig_seq_lens"] = seq.to(fields["orig_seq_lens"].dtype)
    if "max_seq_len_host" in fields:
        fields["max_seq_len_host"] = max(ends)
    draft = worker._draft_worker
    assert draft is not None
    with (
        module.draft_tp_context(draft.parallel_layout),
        module.speculative_moe_backend_context(),
        module.speculative_moe_a2a_backend_context(),
    ):
        fresh = draft._draft_extend_for_prefill(ext, torch.cat(states), nxt)
    target = out.next_draft_input
    target.topk_p, target.topk_index, target.hidden_states = fresh.topk_p, fresh.topk_index, fresh.hidden_states
    _counts["caught_up"] += 1
    _counts["rows"] += sum(lens)


def _broken(why: str) -> None:
    if not _state["broken"]:
        _state["broken"] = True
        logger.warning(FAILED_LINE.format(why=why))
