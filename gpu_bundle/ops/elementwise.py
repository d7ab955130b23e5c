"""Norms, gated activations and rotary embedding with sgl-kernel's signatures (stand-ins).

Semantics as sgl-kernel 0.4.10's Python API (``sgl_kernel/elementwise.py``) and SGLang's
``forward_native`` of the matching layer: math in float32, results cast back, in-place
where sgl-kernel writes in place. No host synchronisation (capturable in a CUDA graph).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)


def rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None):
    """out = input / RMS(input) * weight (``out`` written in place when given)."""
    y = (_rms(input, eps) * weight.float()).to(input.dtype)
    if out is None:
        return y
    out.copy_(y)
    return out


def gemma_rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None):
    """Gemma: out = input / RMS(input) * (1 + weight)."""
    y = (_rms(input, eps) * (1.0 + weight.float())).to(input.dtype)
    if out is None:
        return y
    out.copy_(y)
    return out


def fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None):
    """In place: residual += input; input = rmsnorm(residual) * weight. Returns None."""
    residual.add_(input)
    input.copy_((_rms(residual, eps) * weight.float()).to(input.dtype))


def gemma_fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None):
    """In place: residual += input; input = rmsnorm(residual) * (1 + weight)."""
    residual.add_(input)
    input.copy_((_rms(residual, eps) * (1.0 + weight.float())).to(input.dtype))


def _gated(act, input, out):
    d = input.shape[-1] // 2
    y = (act(input[..., :d].float()) * input[..., d:].float()).to(input.dtype)
    if out is None:
        return y
    if out.shape != y.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(y.shape)}")
    out.copy_(y)
    return out


def silu_and_mul(input, out=None):
    """silu(x[..., :d]) * x[..., d:]."""
    return _gated(F.silu, input, out)


def gelu_and_mul(input, out=None):
    return _gated(lambda t: F.gelu(t, approximate="none"), input, out)


def gelu_tanh_and_mul(input, out=None):
    return _gated(lambda t: F.gelu(t, approximate="tanh"), input, out)


def gelu_quick(input, out=None):
    """x * sigmoid(1.702 x)."""
    y = (input.float() * torch.sigmoid(1.702 * input.float())).to(input.dtype)
    if out is None:
        return y
    out.copy_(y)
    return out


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, is_neox: bool) -> torch.Tensor:
    if is_neox:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox=True):
    """In place on ``query``/``key`` ([tokens, heads * head_size] or [tokens, heads,
    head_size]): rotate the first ``rot_dim = cos_sin_cache.shape[1]`` dims of each head
    by position; ``cos_sin_cache[pos] = [cos(rot_dim/2) | sin(rot_dim/2)]``."""
    cs = cos_sin_cache.index_select(0, positions.reshape(-1).long()).float()
    rot = cs.shape[-1]
    cos, sin = cs[:, : rot // 2].unsqueeze(1), cs[:, rot // 2 :].unsqueeze(1)
    for t in (query, key):
        if t is None:
            continue
        view = t.view(t.shape[0], -1, head_size)
        part = view[..., :rot].float()
        view[..., :rot] = _rotate(part, cos, sin, is_neox).to(t.dtype)
