"""The verdict of the three verification layers (server_control/control/verify.py judges
them): one ``VerifyLayer`` per layer and the ``Verification`` that sums them up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model.vocabulary import Verdict, verdict

LAYERS = ("configuration", "initialisation", "runtime")


@dataclass(frozen=True)
class VerifyLayer:
    name: str
    status: Verdict
    evidence: str | None = None
    cause: str | None = None  # the likely cause of a failure

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "evidence": self.evidence, "cause": self.cause}

    @classmethod
    def from_json(cls, raw: object) -> VerifyLayer | None:
        r = raw if isinstance(raw, dict) else {}
        name, status = r.get("name"), verdict(r.get("status"))
        if not isinstance(name, str) or status is None:
            return None
        evidence, cause = r.get("evidence"), r.get("cause")
        return cls(name, status, evidence if isinstance(evidence, str) else None, cause if isinstance(cause, str) else None)


@dataclass(frozen=True)
class Verification:
    summary: Verdict = Verdict.PENDING  # fail if any layer fails, else pending if any is pending, else pass
    layers: tuple[VerifyLayer, ...] = ()

    @property
    def exit_code(self) -> int:
        """0 all pass, 1 a failure, 3 pending (documented for `specconsole verify`)."""
        return {Verdict.PASS: 0, Verdict.FAIL: 1}.get(self.summary, 3)

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "layers": [x.to_json() for x in self.layers]}

    @classmethod
    def from_json(cls, raw: object) -> Verification:
        r = raw if isinstance(raw, dict) else {}
        layers: list[Any] = r["layers"] if isinstance(r.get("layers"), list) else []
        return cls(
            verdict(r.get("summary")) or Verdict.PENDING,
            tuple(x for x in map(VerifyLayer.from_json, layers) if x is not None),
        )
