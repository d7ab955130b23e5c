"""Pure-torch stand-ins for sgl-kernel's speculative-decoding CPU operators (test rig only).

The PyPI sgl-kernel wheel is CUDA-only, so ``torch.ops.sgl_kernel.*_cpu`` do not exist on
this machine. These functions do what SGLang expects of them (argument order and meaning
as in SGLang 0.5.23's callers in ``sglang/kernels/ops/speculative`` and
``sglang/srt/mem_cache/allocation.py``); ``cpu_ops.register()`` installs them. The ones
every speculative and every steps-0 (target-only) step calls are vectorized, as the CUDA
kernels they stand in for run in microseconds: written as a Python loop a request, they
added ~0.5 ms a step at batch 32 to the host's part of a target-only step that plain
decoding does not pay (docs/cpu-rig.md, "The cold target-only step by its parts"). The
rest are written for clarity: the tree ops of topk > 1.
"""

from __future__ import annotations

import ctypes

import torch


def _ints(t: torch.Tensor) -> list[int]:
    return t.reshape(-1).tolist()


def _segments(req_pool_indices, start_offset, end_offset, have: int, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column in req_to_token of each entry of the packed segments
    ``req_to_token[rpi[i], start[i]:end[i]]``, in order (one gather, no loop a request).
    Segments all of one width (every decode step's) take a broadcast instead of three
    ``repeat_interleave``s: ~25 against ~60 us a call at batch 16."""
    starts, ends = start_offset.reshape(-1).to(torch.int64), end_offset.reshape(-1).to(torch.int64)
    lens = (ends - starts).clamp(min=0)
    width = int(lens[0]) if lens.numel() else 0
    if bool((lens == width).all()):  # every segment as wide (a decode step: 1, or the verify's width)
        need = width * lens.numel()
        if need > have:
            raise RuntimeError(f"{what}: out_cache_loc has {have} entries but offsets require {need}")
        span = torch.arange(width, dtype=torch.int64)
        rows = req_pool_indices.reshape(-1, 1).to(torch.int64).expand(-1, width).reshape(-1)
        return rows, (starts.reshape(-1, 1) + span).reshape(-1)
    need = int(lens.sum())
    if need > have:
        raise RuntimeError(f"{what}: out_cache_loc has {have} entries but offsets require {need}")
    rows = req_pool_indices.reshape(-1).to(torch.int64).repeat_interleave(lens)
    first = torch.cumsum(lens, 0) - lens  # where each segment starts in the packed order
    cols = starts.repeat_interleave(lens) + torch.arange(need, dtype=torch.int64) - first.repeat_interleave(lens)
    return rows, cols


def assign_req_to_token_pool(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """req_to_token[rpi[i], start[i]:end[i]] = out_cache_loc[prefix[i]:prefix[i+1]]."""
    rows, cols = _segments(req_pool_indices, start_offset, end_offset, out_cache_loc.numel(), "assign_req_to_token_pool")
    req_to_token[rows, cols] = out_cache_loc[: rows.numel()].to(req_to_token.dtype)


def assign_extend_cache_locs(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """out_cache_loc[prefix[i]:prefix[i+1]] = req_to_token[rpi[i], start[i]:end[i]]."""
    rows, cols = _segments(req_pool_indices, start_offset, end_offset, out_cache_loc.numel(), "assign_extend_cache_locs")
    out_cache_loc[: rows.numel()] = req_to_token[rows, cols].to(out_cache_loc.dtype)


def assign_draft_cache_locs_contiguous(req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, num_steps):
    """Per request, the topk*num_steps slots reserved right after its committed prefix."""
    width = topk * num_steps
    rows = req_pool_indices.reshape(-1).to(torch.int64)
    cols = seq_lens.reshape(-1).to(torch.int64)[:, None] + torch.arange(width, dtype=torch.int64)
    out_cache_loc[: rows.numel() * width] = req_to_token[rows[:, None], cols].reshape(-1).to(out_cache_loc.dtype)


def build_draft_decode_metadata(req_to_token, req_pool_indices, seq_lens, topk, num_steps, pool_len):
    """Row b*topk+k: request b's prefix, then candidate k's num_steps draft slots."""
    rows = _ints(req_pool_indices)
    out = torch.zeros((len(rows) * topk, pool_len), dtype=req_to_token.dtype)
    for b, (row, sl) in enumerate(zip(rows, _ints(seq_lens))):
        src = req_to_token[row]
        for k in range(topk):
            dst = out[b * topk + k]
            dst[:sl] = src[:sl]
            start = sl + k * num_steps
            dst[sl : sl + num_steps] = src[start : start + num_steps]
    return out


def fill_bonus_tokens(accept_tokens, accept_lens, bonus_tokens, accept_stride):
    """bonus_tokens[i] = the last accepted token of request i."""
    lens = accept_lens.reshape(-1).to(torch.int64)
    at = torch.arange(lens.numel(), dtype=torch.int64) * accept_stride + lens - 1
    bonus_tokens[: lens.numel()] = accept_tokens.reshape(-1)[at].to(bonus_tokens.dtype)


def fill_accept_out_cache_loc(accept_index, out_cache_loc, accept_out_cache_loc):
    """Compact out_cache_loc at the accepted (non -1) flat indices, in order."""
    idx = accept_index.reshape(-1).to(torch.int64)
    keep = idx[idx > -1]
    if keep.numel() and int(keep.max()) >= out_cache_loc.numel():
        raise RuntimeError(f"fill_accept_out_cache_loc: accept_index {int(keep.max())} out of range")
    accept_out_cache_loc[: keep.numel()] = out_cache_loc.reshape(-1)[keep]


def rotate_input_ids(input_ids, extend_start_loc, extend_seq_lens, topk_index, select_index=None):
    """Shift each request's extend segment left by one; put its new token in the last slot
    (or at select_index[i] when given)."""
    new_tokens = _ints(topk_index)
    selects = None if select_index is None else _ints(select_index)
    for i, (start, n) in enumerate(zip(_ints(extend_start_loc), _ints(extend_seq_lens))):
        if n <= 0:
            continue
        input_ids[start : start + n - 1] = input_ids[start + 1 : start + n].clone()
        pos = selects[i] if selects is not None else start + n - 1
        input_ids[pos] = new_tokens[i]


def verify_tree_greedy(
    predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token, retrive_next_sibling, target_predict
):
    """Greedy verification: follow each request's draft tree from the root, accepting a
    child whose draft token equals the target's argmax at the last accepted node."""
    bs, num_draft = candidates.shape
    num_spec_step = accept_index.shape[1]
    cand, ridx = candidates.tolist(), retrive_index.tolist()
    nxt, sib = retrive_next_token.tolist(), retrive_next_sibling.tolist()
    target = _ints(target_predict)
    for b in range(bs):
        last = ridx[b][0]
        accept_index[b, 0] = last
        correct, cur = 0, 0
        for _ in range(1, num_spec_step):
            cur = nxt[b][cur]
            while cur != -1:
                if cand[b][cur] == target[last]:
                    predicts[last] = target[last]
                    correct += 1
                    accept_index[b, correct] = ridx[b][cur]
                    last = ridx[b][cur]
                    break
                cur = sib[b][cur]
            if cur == -1:
                break
        accept_token_num[b] = correct
        predicts[last] = target[last]


def _find(selected_row: list[int], token_idx: int) -> int:
    try:
        return selected_row.index(token_idx)
    except ValueError:
        return -1


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
    """Tree mask, positions and child/sibling links of each request's draft tree.
    tree_mask_mode 0 = FULL_MASK (rows include the prefix, pre-filled by the caller),
    1 = QLEN_ONLY (draft_token_num x draft_token_num per request)."""
    if tree_mask_mode not in (0, 1):
        raise RuntimeError(
            f"build_tree_kernel_efficient_cpu: tree_mask_mode {tree_mask_mode} "
            "is not supported (only 0 FULL_MASK and 1 QLEN_ONLY)"
        )
    bs = selected_index.shape[0]
    parents = parent_list.tolist()
    selected = selected_index.tolist()
    seq_lens = _ints(verified_seq_len)
    pos, ri = positions.view(-1), retrive_index.view(-1)
    rnt, rns = retrive_next_token.view(-1), retrive_next_sibling.view(-1)
    mask = tree_mask.view(-1)
    mask_base = 0
    for b in range(bs):
        off, seq_len, sel = b * draft_token_num, seq_lens[b], selected[b]
        pos[off] = seq_len
        ri[off] = off
        for i in range(draft_token_num - 1, 0, -1):
            ri[off + i] = off + i
            parent_tb = sel[i - 1] // topk
            parent_pos = 0
            if parent_tb > 0:
                found = _find(sel, parents[b][parent_tb])
                if found < 0:
                    continue
                parent_pos = found + 1
            first = int(rnt[off + parent_pos])
            rnt[off + parent_pos] = i
            if first != -1:
                rns[off + i] = first
        width = draft_token_num if tree_mask_mode == 1 else seq_len + draft_token_num
        lead = 0 if tree_mask_mode == 1 else seq_len
        base = off * draft_token_num if tree_mask_mode == 1 else mask_base
        for tid in range(draft_token_num):
            row = base + width * tid + lead
            mask[row] = True
            mask[row + 1 : row + draft_token_num] = False
            if tid == 0:
                continue
            position, cur = 0, tid - 1
            while position < depth:
                position += 1
                mask[row + cur + 1] = True
                ptb = sel[cur] // topk
                if ptb == 0:
                    break
                cur = _find(sel, parents[b][ptb])
                if cur < 0:
                    break
            pos[off + tid] = position + seq_len
        mask_base += (seq_len + draft_token_num) * draft_token_num


def copy_all_layer_kv_cache(data_ptrs, strides, tgt_loc, src_loc):
    """For every KV buffer (base address, row stride in bytes): rows src -> rows tgt.
    All sources are read before any target is written, so overlapping moves are safe."""
    srcs, tgts = _ints(src_loc), _ints(tgt_loc)
    for base, stride in zip(_ints(data_ptrs), _ints(strides)):
        rows = [ctypes.string_at(base + s * stride, stride) for s in srcs]
        for t, data in zip(tgts, rows):
            ctypes.memmove(base + t * stride, data, stride)
