"""EAGLE draft-tree kernels for ``--speculative-eagle-topk 1`` (stand-ins, torch only).

SGLang 0.5.23 on CUDA builds and verifies the draft tree with JIT CUDA kernels
(``sglang.kernels.ops.speculative.tree``: ``build_tree_kernel_efficient``,
``verify_tree_greedy``; same signatures as sgl-kernel's). With topk 1 the tree is a chain
(draft token i's parent is token i-1), so both reduce to tensor arithmetic with no host
synchronisation: every write is a ``scatter_``/``copy_`` at indices computed on the
device. The reference they are tested against is the rig's loop version of the CUDA
kernels' semantics (tests/real_sglang/rig/spec_ops.py). topk > 1 is refused by name.
"""

from __future__ import annotations

import torch

FULL_MASK, QLEN_ONLY = 0, 1


def _need_chain(topk: int, what: str) -> None:
    if topk != 1:
        raise NotImplementedError(f"gpu_bundle {what}: only --speculative-eagle-topk 1 (a chain) is implemented, got topk {topk}")


def build_tree_kernel_efficient(
    parent_list,
    selected_index,
    verified_seq_len,
    tree_mask,
    positions,
    retrive_index,
    retrive_next_token,
    retrive_next_sibling,
    topk,
    depth,
    draft_token_num,
    tree_mask_mode,
):
    """Chain tree of ``draft_token_num`` (N) tokens per request: positions seq_len + i,
    retrive_index b*N + i, next_token i+1 (the last left as the caller filled it, -1),
    next_sibling untouched (-1); tree mask rows: token t sees draft tokens 0..t (FULL_MASK:
    after the request's seq_len prefix, which the caller pre-filled; QLEN_ONLY: N x N)."""
    _need_chain(topk, "build_tree_kernel_efficient")
    if tree_mask_mode not in (FULL_MASK, QLEN_ONLY):
        raise NotImplementedError(
            f"gpu_bundle build_tree_kernel_efficient: tree_mask_mode {tree_mask_mode} (only 0 FULL_MASK and 1 QLEN_ONLY)"
        )
    n = int(draft_token_num)
    dev = positions.device
    bs = selected_index.shape[0]
    seq = verified_seq_len.reshape(-1)[:bs].to(torch.int64)
    steps = torch.arange(n, device=dev, dtype=torch.int64)
    positions.view(-1)[: bs * n].copy_((seq.view(-1, 1) + steps.view(1, -1)).reshape(-1).to(positions.dtype))
    rows = torch.arange(bs, device=dev, dtype=torch.int64).view(-1, 1) * n
    retrive_index.view(bs, -1)[:, :n].copy_((rows + steps.view(1, -1)).to(retrive_index.dtype))
    if n > 1:
        retrive_next_token.view(bs, -1)[:, : n - 1].copy_(steps[1:].view(1, -1).expand(bs, -1).to(retrive_next_token.dtype))
    if tree_mask_mode == QLEN_ONLY:
        width = torch.full((bs,), n, device=dev, dtype=torch.int64)
        lead = torch.zeros(bs, device=dev, dtype=torch.int64)
        base = rows.view(-1) * n
    else:
        width, lead = seq + n, seq
        sizes = (seq + n) * n
        base = torch.cumsum(sizes, 0) - sizes
    tid = steps.view(1, -1, 1)
    j = steps.view(1, 1, -1)
    idx = base.view(-1, 1, 1) + width.view(-1, 1, 1) * tid + lead.view(-1, 1, 1) + j
    vals = (j <= tid).expand(bs, n, n)
    tree_mask.view(-1).scatter_(0, idx.reshape(-1), vals.reshape(-1).to(tree_mask.dtype))


def verify_tree_greedy(
    predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token, retrive_next_sibling, target_predict
):
    """Greedy chain verification: draft token j is accepted while every token before it
    was and it equals the target's argmax at token j-1. Writes accept_index[b, :n+1]
    (flat indices of the accepted path, the rest left as filled), accept_token_num[b] = n,
    and predicts[i] = target_predict[i] at every node of the accepted path."""
    bs, n_draft = candidates.shape
    width = accept_index.shape[1]
    steps = min(width, n_draft)
    ridx = retrive_index.view(bs, -1)[:, :steps].to(torch.int64)
    target = target_predict.reshape(-1)
    if steps > 1:
        prev = target.index_select(0, ridx[:, :-1].reshape(-1)).view(bs, steps - 1)
        match = candidates[:, 1:steps].to(prev.dtype) == prev
        n = torch.cumprod(match.to(torch.int64), dim=1).sum(dim=1)
    else:
        n = torch.zeros(bs, device=candidates.device, dtype=torch.int64)
    on_path = torch.arange(steps, device=candidates.device).view(1, -1) <= n.view(-1, 1)
    accept_index[:, :steps].copy_(torch.where(on_path, ridx.to(accept_index.dtype), accept_index[:, :steps]))
    accept_token_num.copy_(n.to(accept_token_num.dtype))
    flat = ridx.reshape(-1)
    keep = predicts.reshape(-1).index_select(0, flat)
    new = torch.where(on_path.reshape(-1), target.index_select(0, flat).to(predicts.dtype), keep)
    predicts.view(-1).scatter_(0, flat, new)
