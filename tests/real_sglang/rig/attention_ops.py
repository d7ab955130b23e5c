"""Pure-torch stand-ins for sgl-kernel's ``decode_attention_cpu`` / ``extend_attention_cpu``
(test rig only; called by SGLang's ``intel_amx`` attention backend, argument order as in
``sglang/srt/layers/attention/intel_amx_backend.py`` of 0.5.23).

KV caches are ``[slots, kv_heads, head_dim]``; a request's keys are the slots listed in
``req_to_token[req_pool_indices[i], :seq_lens[i]]``. Math in float32, one request at a time.
"""

from __future__ import annotations

import torch


def _attend(q, k, v, sm_scale, logit_cap, sinks, mask=None):
    """q [T, H, D], k/v [L, Hkv, D*]; mask [T, L] bool (True = may attend) -> [T, H, Dv]."""
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads != kv_heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("thd,lhd->htl", q.float(), k.float()) * sm_scale
    if logit_cap and logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(0), float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(heads, 1, 1).expand(heads, scores.shape[1], 1)
        probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return torch.einsum("htl,lhd->thd", probs, v.float())


def _window_mask(q_pos, k_len, window):
    """[T, L] True where key position j is causal and inside the sliding window."""
    k_pos = torch.arange(k_len).view(1, -1)
    mask = k_pos <= q_pos.view(-1, 1)
    if window and window > 0:
        mask &= k_pos > q_pos.view(-1, 1) - window
    return mask


# The last call's batch metadata and what it implied (the layers of one forward share the
# same tensors): ((tensor, its _version) per input, the new tokens' slots or None).
_LAST_META: list = []


def _new_slots(req_to_token, req_pool_indices, seq_lens, ext_lens, starts):
    """Each request's new-token slot when every request extends by one token at rows
    0..bs-1, else None. Memoised on the tensors' identity and ``_version`` (an in-place
    change bumps it), so the layers of one forward pay for it once; inference-mode tensors
    (no version counter: SGLang's ``SGLANG_ENABLE_TORCH_INFERENCE_MODE``) are never
    memoised."""
    try:
        key = [(t, t._version) for t in (req_to_token, req_pool_indices, seq_lens, ext_lens, starts)]
    except RuntimeError:
        key = None
        _LAST_META.clear()
    if key is not None and _LAST_META and all(a is b and va == vb for (a, va), (b, vb) in zip(_LAST_META[0], key)):
        return _LAST_META[1]
    bs = seq_lens.shape[0]
    one = bs == ext_lens.shape[0] == starts.shape[0] and bool((ext_lens == 1).all())
    slots = req_to_token[req_pool_indices, seq_lens - 1].long() if one and torch.equal(starts.long(), torch.arange(bs)) else None
    if key is not None:
        _LAST_META[:] = [key, slots]
    return slots


def _one_query_cached(
    q, k_new, v_new, k_buffer, v_buffer, req_to_token, req_pool_indices, seq_lens, ext_lens, starts, tree_mask, is_causal
):
    """Whether an extend call is the decode case: one query per request (request i's query
    is row i, its new token the last of its ``seq_lens[i]`` slots), causal, no tree mask,
    and the cache already holding the new K/V bit for bit, in their own dtype, at those
    slots (what SGLang's ``forward_extend`` leaves after ``set_kv_buffer``; checked on
    every call, not assumed).

    A verify with one draft token per request (the patch's target-only steps) is such a
    call. The general path below computes the same outputs for it, with extra per-request
    work (overwriting the gathered rows with ``k/v_extend``, more slicing): the stand-in's
    own cost, not SGLang's, so this case runs the decode stand-in's loop instead."""
    if q.shape[0] != seq_lens.shape[0] or not is_causal or (tree_mask is not None and tree_mask.numel() > 0):
        return False
    new_slots = _new_slots(req_to_token, req_pool_indices, seq_lens, ext_lens, starts)
    if new_slots is None:
        return False
    if k_new is None or v_new is None:
        return True  # the general path reads the new keys from the cache too
    if k_new.dtype != k_buffer.dtype or v_new.dtype != v_buffer.dtype:
        return False
    k_cached, v_cached = k_buffer[new_slots], v_buffer[new_slots]
    return bool(
        k_new.numel() == k_cached.numel()
        and v_new.numel() == v_cached.numel()
        and torch.equal(k_cached, k_new.reshape(k_cached.shape))
        and torch.equal(v_cached, v_new.reshape(v_cached.shape))
    )


def decode_attention(
    query,
    k_cache,
    v_cache,
    k_scale,
    v_scale,
    output,
    key,
    value,
    loc,
    attn_logits,
    req_to_token,
    req_pool_indices,
    seq_lens,
    sm_scale,
    logit_cap,
    is_cross_attention,
    sliding_window_size,
    encoder_lens,
    sinks,
):
    """One new token per request: store its K/V at ``loc`` (when given), then attend over
    the request's ``seq_lens[i]`` cached slots. ``attn_logits`` is scratch, left untouched."""
    if is_cross_attention:
        raise NotImplementedError("rig decode_attention_cpu: cross-attention is not supported")
    if key is not None and value is not None:
        k_cache[loc] = key.view(-1, *k_cache.shape[1:]).to(k_cache.dtype)
        v_cache[loc] = value.view(-1, *v_cache.shape[1:]).to(v_cache.dtype)
    rows, lens = req_pool_indices.tolist(), seq_lens.tolist()
    for i, (row, n) in enumerate(zip(rows, lens)):
        slots = req_to_token[row, :n].long()
        k = k_cache[slots].float() * k_scale
        v = v_cache[slots].float() * v_scale
        mask = _window_mask(torch.tensor([n - 1]), n, sliding_window_size)
        output[i] = _attend(query[i : i + 1], k, v, sm_scale, logit_cap, sinks, mask)[0].to(output.dtype)


def extend_attention(
    q_extend,
    k_extend,
    v_extend,
    o_extend,
    k_buffer,
    v_buffer,
    k_scale,
    v_scale,
    req_to_token,
    req_pool_indices,
    seq_lens,
    extend_seq_lens,
    extend_start_loc,
    max_len_extend,
    sm_scale,
    logit_cap,
    is_cross_attention,
    sliding_window_size,
    encoder_lens,
    sinks,
    tree_mask,
    is_causal,
):
    """Prefill / verify: request i has ``seq_lens[i]`` tokens in total, the last
    ``extend_seq_lens[i]`` of them new (rows ``extend_start_loc[i]...`` of q/k/v_extend).
    Prefix keys come from the cache; new keys from k/v_extend (or the cache when None).
    ``tree_mask`` (FULL_MASK layout: per request ext x seq_len, concatenated) replaces the
    causal rule among the new tokens; ``is_causal=False`` lets every query see every key."""
    if is_cross_attention:
        raise NotImplementedError("rig extend_attention_cpu: cross-attention is not supported")
    if _one_query_cached(
        q_extend, k_extend, v_extend, k_buffer, v_buffer, req_to_token, req_pool_indices, seq_lens,
        extend_seq_lens, extend_start_loc, tree_mask, is_causal,
    ):  # fmt: skip
        # One causal query per request whose K/V the cache already holds: the decode
        # stand-in's loop, the same math on the same values (see _one_query_cached).
        decode_attention(
            q_extend, k_buffer, v_buffer, k_scale, v_scale, o_extend, None, None, None, None,
            req_to_token, req_pool_indices, seq_lens, sm_scale, logit_cap, False, sliding_window_size, encoder_lens, sinks,
        )  # fmt: skip
        return
    rows, lens = req_pool_indices.tolist(), seq_lens.tolist()
    exts, starts = extend_seq_lens.tolist(), extend_start_loc.tolist()
    mask_off = 0
    for row, total, ext, start in zip(rows, lens, exts, starts):
        prefix = total - ext
        slots = req_to_token[row, :total].long()
        k = k_buffer[slots].float()
        v = v_buffer[slots].float()
        if k_extend is not None and v_extend is not None:
            k[prefix:] = k_extend[start : start + ext].float()
            v[prefix:] = v_extend[start : start + ext].float()
        k, v = k * k_scale, v * v_scale
        q_pos = torch.arange(prefix, total)
        if tree_mask is not None and tree_mask.numel() > 0:
            mask = tree_mask.reshape(-1)[mask_off : mask_off + ext * total].view(ext, total).bool()
        elif is_causal:
            mask = _window_mask(q_pos, total, sliding_window_size)
        else:
            mask = None
        mask_off += ext * total
        out = _attend(q_extend[start : start + ext], k, v, sm_scale, logit_cap, sinks, mask)
        o_extend[start : start + ext] = out.to(o_extend.dtype)
