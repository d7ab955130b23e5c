"""Every rank takes the same reserve out of its KV budget, or none takes any.

SGLang sizes each rank's KV pool from the memory that rank can have (the minimum over the
ranks, so the pools match) minus what the patch reserves for the steps=0 state
(reserve.py). That reserve comes from the configuration (the same everywhere) or from
``SPECCONSOLE_DYNSPEC_RESERVE_GIB`` and ``SGLANG_FLASHINFER_WORKSPACE_SIZE`` in each
process's environment, which can differ between the nodes of one server. Ranks whose pools
differ in size schedule one batch into different slots: so, in the target's
``_profile_available_bytes`` (before any pool exists, on every rank that sizes one), each
rank reports its figure and where it came from through the world group's key-value store
(the TCPStore of ``init_process_group``; point-to-point, with a timeout, as rank_agreement.py
does and for its reasons: a rank without the patch never joins a collective), waits for
every rank's, and takes the reserve only when every rank reported the same one. Otherwise
no rank takes any (every pool is sized as SGLang alone would) and every rank turns the
switch off with one reason naming each rank's figure (``reserve.refuse``: the worker's
set-up reads it), so the ranks' later agreement finds them all off for the same reason.
"""

from __future__ import annotations

import datetime
import json
import logging
from dataclasses import dataclass

from server_control.sglang_patch.sglang_shapes import Store

logger = logging.getLogger("sglang.srt.mem_cache.kv_cache_configurator")

KEY = "specconsole/dynspec/v2/reserve/{rank}"
PRECISION_GIB = 1e-6  # figures closer than this are the same reserve (~1 KiB)


@dataclass(frozen=True)
class Figure:
    """One rank's reserve: ``gib`` (0 when it takes none) and where it came from (the
    variable's name, ``estimate``, or why nothing is taken)."""

    gib: float
    source: str

    def to_json(self) -> str:
        return json.dumps({"gib": self.gib, "source": self.source})

    @classmethod
    def from_json(cls, raw: bytes | str) -> Figure:
        item = json.loads(raw)
        return cls(float(item["gib"]), str(item["source"]))


@dataclass(frozen=True)
class ReserveVerdict:
    """What every rank that reads it takes (``gib``), and why the switch is off when the
    ranks did not report one reserve (``reason``; None when they agree)."""

    gib: float
    reason: str | None
    ranks: int = 1  # how many ranks reported (1: no process group to ask)


def judge(figures: list[Figure | None], timeout_s: float) -> ReserveVerdict:
    """The verdict on every rank's report (None: no report within ``timeout_s``)."""
    missing = [i for i, f in enumerate(figures) if f is None]
    if missing:
        names = ", ".join(f"rank {i}" for i in missing)
        return ReserveVerdict(
            0.0,
            ranks=len(figures),
            reason=f"{names} did not report the memory reserved for the target-only state within {timeout_s:.0f} s "
            "(no patch there, another version of it, or failed): nothing is taken out of any rank's KV cache "
            "budget; the switch is off on every rank",
        )
    present = [f for f in figures if f is not None]
    first = present[0]
    if all(abs(f.gib - first.gib) < PRECISION_GIB for f in present):
        return ReserveVerdict(first.gib, None, len(figures))
    each = "; ".join(f"rank {i}: {f.gib:.3f} GiB ({f.source})" for i, f in enumerate(present))
    return ReserveVerdict(
        0.0,
        ranks=len(figures),
        reason=f"the ranks would size their KV pools differently ({each}): nothing is taken out of any rank's KV "
        "cache budget; the switch is off on every rank",
    )


def agree(mine: Figure, store: Store, rank: int, world: int, timeout_s: float) -> ReserveVerdict:
    """Report ``mine`` as ``rank`` of ``world``, wait (bounded) for every rank's, judge."""
    store.set(KEY.format(rank=rank), mine.to_json())
    keys = [KEY.format(rank=i) for i in range(world)]
    try:
        store.wait(keys, datetime.timedelta(seconds=timeout_s))
    except Exception:  # noqa: BLE001 - a timeout: judge who answered
        pass
    figures: list[Figure | None] = []
    for key in keys:
        try:
            figures.append(Figure.from_json(store.get(key)) if store.check([key]) else None)
        except (ValueError, KeyError, TypeError):  # an unreadable report counts as none
            figures.append(None)
    return judge(figures, timeout_s)


def settle(mine: Figure) -> ReserveVerdict:
    """``agree`` over the world group when there is one (the store and the ranks from
    torch.distributed), else this rank's own figure. A store that cannot be had is a
    verdict of nothing taken, the switch off (the other ranks time out the same way)."""
    from server_control.sglang_patch import rank_agreement

    try:
        import torch.distributed as dist

        if not dist.is_initialized() or dist.get_world_size() <= 1:
            return ReserveVerdict(mine.gib, None)
        rank, world = dist.get_rank(), dist.get_world_size()
        store = rank_agreement.default_store()
    except Exception as exc:  # noqa: BLE001 - no way to agree: take nothing, say why
        return ReserveVerdict(0.0, f"cannot compare the ranks' memory reserved for the target-only state ({exc})")
    return agree(mine, store, rank, world, rank_agreement.timeout_s())
