"""How often the threshold rule switched the mode lately (``SwitchRate``) and the one setting
to change when that is flapping (``Suggestion``); server_control/telemetry/flapping.py
measures it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model.json_read import as_int, as_num, as_obj, as_str
from server_control.protocol import decision

WINDOW_S = 120.0  # the rate is measured over the last two minutes


@dataclass(frozen=True)
class Suggestion:
    key: str  # decision.HYSTERESIS_KEY or decision.DWELL_KEY
    name: str  # "hysteresis" or "min dwell"
    value: int
    current: int
    effect: str  # what it changes, in the operator's words

    def describe(self) -> str:
        return f"{self.name} {self.current} -> {self.value} ({self.effect})"

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "value": self.value, "current": self.current, "effect": self.effect}

    @classmethod
    def from_json(cls, raw: object) -> Suggestion | None:
        r = as_obj(raw)
        key, value, current = as_str(r.get("key")), as_int(r.get("value")), as_int(r.get("current"))
        if key not in (decision.HYSTERESIS_KEY, decision.DWELL_KEY) or value is None or current is None:
            return None
        return cls(key, as_str(r.get("name")) or key, value, current, as_str(r.get("effect")) or "")


@dataclass(frozen=True)
class SwitchRate:
    per_min: float = 0.0
    count: int = 0  # rule-made switches in the window
    window_s: float = WINDOW_S
    flapping: bool = False
    suggestion: Suggestion | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "per_min": self.per_min,
            "count": self.count,
            "window_s": self.window_s,
            "flapping": self.flapping,
            "suggestion": self.suggestion.to_json() if self.suggestion else None,
        }

    @classmethod
    def from_json(cls, raw: object) -> SwitchRate:
        r = as_obj(raw)
        return cls(
            float(as_num(r.get("per_min")) or 0.0),
            as_int(r.get("count")) or 0,
            float(as_num(r.get("window_s")) or WINDOW_S),
            r.get("flapping") is True,
            Suggestion.from_json(r.get("suggestion")),
        )
