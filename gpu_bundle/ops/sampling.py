"""Sampling helpers with sgl-kernel's names (stand-ins, torch only).

gpu-check serves greedy requests with ``--sampling-backend pytorch``, so these are not on
its path; they exist so that SGLang's CUDA sampler imports resolve, and they follow
SGLang's own pytorch-backend semantics (``sampler.py`` top-k/top-p/min-p renormalisation).
"""

from __future__ import annotations

import torch


def _as_col(v, like: torch.Tensor) -> torch.Tensor:
    if isinstance(v, torch.Tensor):
        return v.to(like.device).view(-1, 1)
    return torch.full((like.shape[0], 1), v, device=like.device)


def top_k_renorm_prob(probs, top_k):
    """Keep each row's top_k largest probabilities (ties at the k-th kept), renormalise."""
    k = _as_col(top_k, probs).long().clamp(1, probs.shape[-1])
    kth = probs.sort(dim=-1, descending=True).values.gather(-1, k - 1)
    kept = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_renorm_prob(probs, top_p):
    """Drop each token whose higher-ranked mass already exceeds top_p (SGLang's pytorch
    sampler: the top token always stays), renormalise."""
    p = _as_col(top_p, probs).to(probs.dtype)
    sorted_p, order = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    sorted_p = torch.where(before > p, torch.zeros_like(sorted_p), sorted_p)  # as sampler.py
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    return kept / kept.sum(dim=-1, keepdim=True)


def _draw(probs, generator=None):
    return torch.multinomial(probs, 1, generator=generator).view(-1)


def top_k_top_p_sampling_from_probs(
    probs, top_k, top_p, filter_apply_order="joint", deterministic=True, generator=None, check_nan=False, **_
):
    return _draw(top_p_renorm_prob(top_k_renorm_prob(probs, top_k), top_p), generator)


def min_p_sampling_from_probs(probs, min_p, deterministic=True, generator=None, check_nan=False, **_):
    floor = _as_col(min_p, probs).to(probs.dtype) * probs.max(dim=-1, keepdim=True).values
    kept = torch.where(probs >= floor, probs, torch.zeros_like(probs))
    return _draw(kept / kept.sum(dim=-1, keepdim=True), generator)


top_k_renorm_probs = top_k_renorm_prob
top_p_renorm_probs = top_p_renorm_prob
