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
