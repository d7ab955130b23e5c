"""The steps=0 state's memory, taken out of the KV budget before the KV pool is sized.

SGLang sizes the KV pool (``KVCacheConfigurator._profile_available_bytes``) before any
graph capture, so the state the patch builds after it (a second target attention backend
and draft-extend backend, and with CUDA graphs their graph runners and static buffers)
would otherwise come out of the activation headroom SGLang keeps for itself
(``mem_fraction_static``). ``reserve_gib`` is subtracted from the TARGET's KV budget
(targets/kv_cache_configurator.py), once per process, so the server's capacity
(``max_total_num_tokens``) reflects it:

  * ``SPECCONSOLE_DYNSPEC_RESERVE_GIB`` when set (the operator's figure, e.g. a
    ``used_gib`` measured by ``scripts/gpu-check``);
  * else an estimate from the configuration: two page tables (target and draft-extend
    backends) of ``bs x ceil(context / page)`` int32, and with decode CUDA graphs two
    sets of static buffers of ``bs x (vocab + 16 x hidden)`` float32 (logits and hidden
    states), ``bs`` being the largest decode graph bucket (else the running cap); with
    decode CUDA graphs also ``GRAPH_FIXED_MIB`` for the graphs themselves (their private
    pool's segments and the driver's instantiated graphs: on an H200 the rig's pair, 40
    graphs of 4 + 1 layers, took 0.012 GiB where the buffers above come to 0.0009 GiB); and
    with a FlashInfer attention backend the workspace SGLang allocates anew for the state's
    target backend (``init_new_workspace=True``: 512 MiB, SGLang's largest default outside
    deterministic inference, 2 GiB with it, or ``SGLANG_FLASHINFER_WORKSPACE_SIZE`` when
    set larger).

Every rank that sizes a KV pool takes the same figure or none (reserve_agreement.py); a
figure that cannot be had or agreed on turns the switch off (``refuse``). The figure is
published as ``state_memory.reserved_gib`` beside the ``used_gib`` measured
after the build; a rank whose build took more than the reserve logs a warning naming
both and the variable. Standard library only.
"""

from __future__ import annotations

import math
import os

RESERVE_ENV = "SPECCONSOLE_DYNSPEC_RESERVE_GIB"
GIB = 1024**3
MIB = 1024**2
# The decode graphs' own memory beyond their static buffers: 12 MiB measured on one H200
# (2026-12-04, the rig's tiny pair, 40 graphs); 64 MiB leaves room for real models' larger
# graphs (more nodes, more segments). gpu-check's "steps=0 memory per rank" measures it.
GRAPH_FIXED_MIB = 64
FLASHINFER_WORKSPACE_MIB = 512
FLASHINFER_DETERMINISTIC_WORKSPACE_MIB = 2048
FLASHINFER_WORKSPACE_ENV = "SGLANG_FLASHINFER_WORKSPACE_SIZE"
_reserved: list[float | None] = [None]  # GiB taken out of this process's target KV budget
_refused: list[str | None] = [None]  # why no reserve could be taken: the switch is off (refusals.py)


def reserved_gib() -> float | None:
    return _reserved[0]


def refuse(reason: str) -> None:
    """No reserve was taken for ``reason`` (a bad figure, the ranks differing): the
    worker's set-up turns the switch off with it (refusals.reserve_refused)."""
    _refused[0] = reason


def refused() -> str | None:
    return _refused[0]


def operator_gib() -> float | None:
    """``SPECCONSOLE_DYNSPEC_RESERVE_GIB`` (a finite number >= 0), or None when unset."""
    raw = os.environ.get(RESERVE_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{RESERVE_ENV}={raw!r} is not a number of GiB") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{RESERVE_ENV}={raw!r} must be a finite number of GiB >= 0")
    return value


def workspace_bytes(attention: tuple[str | None, ...], deterministic: bool) -> int:
    """The FlashInfer workspace the state's target backend allocates anew (0 for any
    other attention backend)."""
    if not any("flashinfer" in str(name or "") for name in attention):
        return 0
    default = FLASHINFER_DETERMINISTIC_WORKSPACE_MIB if deterministic else FLASHINFER_WORKSPACE_MIB
    try:
        configured = int(os.environ.get(FLASHINFER_WORKSPACE_ENV, "0") or 0)
    except ValueError:
        configured = 0
    return max(default * MIB, configured)


def estimate_gib(
    bs: int,
    context_len: int,
    page_size: int,
    vocab: int,
    hidden: int,
    graphs: bool,
    attention: tuple[str | None, ...] = (),
    deterministic: bool = False,
) -> float:
    """The formula of the module docstring (GiB)."""
    pages = math.ceil(max(1, context_len) / max(1, page_size))
    total = 2 * bs * pages * 4
    if graphs:
        total += 2 * bs * (vocab + 16 * hidden) * 4 + GRAPH_FIXED_MIB * MIB
    total += workspace_bytes(attention, deterministic)
    return round(total / GIB, 4)


def take(available_bytes: int, gib: float) -> int:
    """The KV budget with ``gib`` taken out (never below zero); records the reserve."""
    _reserved[0] = gib
    return max(0, int(available_bytes - gib * GIB))
