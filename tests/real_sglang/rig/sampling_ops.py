"""Pure-torch stand-in for sgl-kernel's ``murmur_hash32_cpu`` (test rig only): the hash
SGLang 0.5.23's seeded sampling draws from (``sampler.multinomial_with_seed``), written
after its Triton kernel (``sglang/kernels/ops/sampling/murmur_hash.py``): MurmurHash3
(32-bit) over four 4-byte blocks, the seed's low and high words, the position and the
column, finalised with length 16. Arithmetic in int64, masked to 32 bits (a product that
wraps keeps its low 32 bits). Returns int64 holding the unsigned 32-bit values (its one
caller converts to float64 at once).
"""

from __future__ import annotations

import torch

_M = 0xFFFFFFFF


def _rotl(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) | (x >> (32 - r))) & _M


def _mix(h: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    k = (k * 0xCC9E2D51) & _M
    k = _rotl(k, 15)
    k = (k * 0x1B873593) & _M
    h = h ^ k
    h = _rotl(h, 13)
    return (h * 5 + 0xE6546B64) & _M


def murmur_hash32(seed: torch.Tensor, positions: torch.Tensor, col_indices: torch.Tensor) -> torch.Tensor:
    """[n] seeds (uint64), [n] positions, [m] columns -> [n, m] hashes."""
    s = seed.to(torch.int64).view(-1, 1)
    h = torch.zeros((s.shape[0], 1), dtype=torch.int64)
    h = _mix(h, s & _M)
    h = _mix(h, (s >> 32) & _M)
    h = _mix(h, positions.to(torch.int64).view(-1, 1) & _M)
    h = _mix(h, col_indices.to(torch.int64).view(1, -1) & _M)
    h = h ^ 16
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _M
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _M
    return h ^ (h >> 16)


def murmur_hash32_reference(seed: int, position: int, col: int) -> int:
    """The same hash on Python integers, block by block (for the rig's own test)."""

    def mix(h: int, k: int) -> int:
        k = (k * 0xCC9E2D51) & _M
        k = ((k << 15) | (k >> 17)) & _M
        k = (k * 0x1B873593) & _M
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M
        return (h * 5 + 0xE6546B64) & _M

    h = 0
    for block in (seed & _M, (seed >> 32) & _M, position & _M, col & _M):
        h = mix(h, block)
    h ^= 16
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M
    return h ^ (h >> 16)
