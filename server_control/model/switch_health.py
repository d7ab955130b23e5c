"""Whether the dynamic speculation switch really runs, as the server reports it.

From ``/server_info`` ``internal_states[i].dynamic_speculation`` (the SGLang patch; the
simulator reports the same): ``active`` and the patch's ``reason`` when it is off, TP
ranks whose live values disagree (``ranks``), the draft steps the worker really runs
(``num_steps``: 0 while target-only, or the adaptive controller's own 0), and the accept
length over the verify steps that drafted (``verifies`` / ``accepted_drafts``: SGLang's
own accept length reads 1 while target-only), and per rank the steps=0 state's memory and
the graph / eager decode steps per mode (``rank_resources.py``). A frozen part of the session snapshot
(``SpecStatus.health``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model import rank_resources
from server_control.model.json_read import as_bool, as_int, as_list, as_num, as_obj, as_str
from server_control.model.rank_resources import RankResources
from server_control.protocol import rank_verdict


@dataclass(frozen=True)
class SwitchHealth:
    active: bool | None = None  # None: the server did not say (stock SGLang, older patch)
    reason: str | None = None  # why the switch is off, in the patch's words
    rank_fault: str | None = None  # TP ranks that disagree with TP0 ("TP1 threshold=4 (TP0: ...)")
    num_steps: int | None = None  # draft steps the worker runs now (DP rank 0)
    accept_len: float | None = None  # tokens per request per verify over speculative steps
    ranks: tuple[RankResources, ...] = ()  # per rank: the steps=0 state's memory, graph/eager steps

    def to_json(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "reason": self.reason,
            "rank_fault": self.rank_fault,
            "num_steps": self.num_steps,
            "accept_len": self.accept_len,
            "ranks": [r.to_json() for r in self.ranks],
        }

    @classmethod
    def from_json(cls, raw: object) -> SwitchHealth:
        r = as_obj(raw)
        return cls(
            active=as_bool(r.get("active")),
            reason=as_str(r.get("reason")),
            rank_fault=as_str(r.get("rank_fault")),
            num_steps=as_int(r.get("num_steps")),
            accept_len=as_num(r.get("accept_len")),
            ranks=tuple(RankResources.from_json(x) for x in as_list(r.get("ranks"))),
        )

    @classmethod
    def from_states(cls, dynamics: list[Any]) -> SwitchHealth:
        """From each DP rank's ``dynamic_speculation`` dict (None where absent)."""
        dyns = [d for d in dynamics if isinstance(d, dict)]
        if not dyns:
            return cls()
        flags = [d.get("active") for d in dyns]
        off = next((d for d in dyns if d.get("active") is False), None)
        faults = []
        for i, d in enumerate(dynamics):
            rows = d.get("ranks") if isinstance(d, dict) else None
            fault = rank_verdict.disagreement(rows) if isinstance(rows, list) else None
            if fault:
                faults.append(f"DP{i} {fault}" if len(dynamics) > 1 else fault)
        verifies = sum(as_num(d.get("verifies")) or 0 for d in dyns)
        accepted = sum(as_num(d.get("accepted_drafts")) or 0 for d in dyns)
        return cls(
            active=False if off is not None else (True if all(f is True for f in flags) else None),
            reason=as_str(off.get("reason")) if off is not None else None,
            rank_fault="; ".join(faults) or None,
            num_steps=as_int(dyns[0].get("num_steps")),
            accept_len=1 + accepted / verifies if verifies else None,
            ranks=rank_resources.from_states(dynamics),
        )
