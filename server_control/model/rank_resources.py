"""What each rank's steps=0 state costs and how its decode forwards ran, as the server
reports it: from ``/server_info`` ``dynamic_speculation`` (``ranks``: one row per TP rank,
gathered by the SGLang patch; with TP 1 the snapshot itself), each rank's
``state_memory`` (GiB: ``used_gib`` measured after the build, ``estimate_gib`` and
``free_gib`` before it, ``reserved_gib`` taken out of the KV budget) and ``forwards``
(per mode: target graph / eager, draft-extend graph / eager decode steps). A frozen part
of ``SwitchHealth``; ``status --json`` and the console's GPU panel show it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from server_control.model.json_read import as_int, as_num, as_obj, as_str
from server_control.protocol.spec_metrics import FORWARD_PARTS

MEMORY_KEYS = ("used_gib", "estimate_gib", "free_gib", "reserved_gib")


def _forwards(raw: object) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for mode, parts in as_obj(raw).items():
        counts = as_obj(parts)
        out[str(mode)] = {p: as_int(counts.get(p)) or 0 for p in FORWARD_PARTS}
    return out


@dataclass(frozen=True)
class RankResources:
    rank: str  # "TP1", or "DP1 TP0" with more than one DP rank
    memory: Mapping[str, float | None] = field(default_factory=dict)  # MEMORY_KEYS, GiB
    forwards: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # mode -> part -> steps
    failed: str | None = None  # the rank's "rank failed: ..." row

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "memory": dict(self.memory),
            "forwards": {m: dict(c) for m, c in self.forwards.items()},
            "failed": self.failed,
        }

    @classmethod
    def from_json(cls, raw: object) -> RankResources:
        r = as_obj(raw)
        memory = as_obj(r.get("memory"))
        return cls(
            rank=as_str(r.get("rank")) or "?",
            memory={k: as_num(memory.get(k)) for k in MEMORY_KEYS},
            forwards=_forwards(r.get("forwards")),
            failed=as_str(r.get("failed")),
        )

    @classmethod
    def from_row(cls, rank: str, row: dict[str, Any]) -> RankResources:
        memory = as_obj(row.get("state_memory"))
        return cls(
            rank=rank,
            memory={k: as_num(memory.get(k)) for k in MEMORY_KEYS},
            forwards=_forwards(row.get("forwards")),
            failed=as_str(row.get("failed")),
        )

    def graph_share(self, mode: str, part: str) -> str:
        """``graph/all`` decode steps of ``part`` (``target`` / ``draft_extend``) in ``mode``."""
        c = self.forwards.get(mode) or {}
        graph, eager = c.get(f"{part}_graph", 0), c.get(f"{part}_eager", 0)
        return f"{graph}/{graph + eager}"


def _reports(row: dict[str, Any]) -> bool:
    return any(row.get(k) is not None for k in ("state_memory", "forwards", "failed"))


def from_states(dynamics: list[Any]) -> tuple[RankResources, ...]:
    """One entry per TP rank of every DP rank that reports its memory, its forwards or its
    failure (``dynamics``: each DP rank's ``dynamic_speculation`` dict, None where absent)."""
    out = []
    for i, d in enumerate(dynamics):
        if not isinstance(d, dict):
            continue
        prefix = f"DP{i} " if len(dynamics) > 1 else ""
        rows = d.get("ranks")
        if isinstance(rows, list) and rows:
            for j, row in enumerate(rows):
                if isinstance(row, dict) and _reports(row):
                    rank = as_int(row.get("rank"))
                    out.append(RankResources.from_row(f"{prefix}TP{j if rank is None else rank}", row))
        elif _reports(d):
            out.append(RankResources.from_row(f"{prefix}TP0", d))
    return tuple(out)
