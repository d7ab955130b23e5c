"""Phased built-in traffic: ``--sim-traffic phases:PHASE/PHASE/...``, cycling forever.

A phase is comma-separated ``key=value`` items:
  * ``s=SECONDS``  how long the phase lasts (simulated seconds, required)
  * ``c=N`` or ``c=LO-HI``  requests kept in flight: N, or a cosine wave LO..HI..LO
    (so a steady load spans a threshold both ways)
  * ``period=SECONDS``  the wave's period (default 20)
  * ``ctx=TOKENS``  mean prompt length (each request uniform 0.5..1.5 x; default 544,
    the 64..1024 of the other profiles)
  * ``p=P``  per-draft-token acceptance probability 0 < P < 1 (default: the calibration's)

e.g. short chat then long-context summarisation, high then low acceptance:
    phases:s=60,c=2-16,ctx=400,p=0.85/s=60,c=2-16,ctx=6000,p=0.6
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_CTX = 544
DEFAULT_PERIOD = 20.0


class PhaseError(ValueError):
    pass


@dataclass(frozen=True)
class Phase:
    seconds: float
    lo: int
    hi: int
    period_s: float = DEFAULT_PERIOD
    ctx: int = DEFAULT_CTX
    accept_p: float | None = None

    def concurrency(self, t: float) -> int:
        """Requests to keep in flight ``t`` seconds into the phase."""
        if self.lo == self.hi:
            return self.lo
        x = (t % self.period_s) / self.period_s
        return self.lo + round((self.hi - self.lo) * (1 - math.cos(2 * math.pi * x)) / 2)


def _number(phase: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PhaseError(f"phase {phase!r}: {key}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise PhaseError(f"phase {phase!r}: {key}={text!r} is not finite")
    return value


def _count(phase: str, key: str, text: str, hi: int = 4096) -> int:
    value = _number(phase, key, text)
    if not value.is_integer() or not 1 <= value <= hi:
        raise PhaseError(f"phase {phase!r}: {key} must be an integer 1..{hi}, got {text!r}")
    return int(value)


def parse_phase(text: str) -> Phase:
    items: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not value.strip():
            raise PhaseError(f"phase {text!r}: expected key=value items, got {item!r}")
        if key not in ("s", "c", "period", "ctx", "p"):
            raise PhaseError(f"phase {text!r}: unknown key {key!r} (s, c, period, ctx, p)")
        if key in items:
            raise PhaseError(f"phase {text!r}: {key} given twice")
        items[key] = value.strip()
    if "s" not in items or "c" not in items:
        raise PhaseError(f"phase {text!r}: needs s=SECONDS and c=N or c=LO-HI")
    seconds = _number(text, "s", items["s"])
    if seconds <= 0:
        raise PhaseError(f"phase {text!r}: s must be > 0")
    lo_text, _, hi_text = items["c"].partition("-")
    lo = _count(text, "c", lo_text)
    hi = _count(text, "c", hi_text) if hi_text else lo
    if hi < lo:
        raise PhaseError(f"phase {text!r}: c={items['c']} runs backwards")
    period = _number(text, "period", items.get("period", str(DEFAULT_PERIOD)))
    if period <= 0:
        raise PhaseError(f"phase {text!r}: period must be > 0")
    ctx = _count(text, "ctx", items["ctx"], 1_000_000) if "ctx" in items else DEFAULT_CTX
    p = None
    if "p" in items:
        p = _number(text, "p", items["p"])
        if not 0 < p < 1:
            raise PhaseError(f"phase {text!r}: p must be between 0 and 1, got {items['p']!r}")
    return Phase(seconds, lo, hi, period, ctx, p)


def parse_phases(text: str) -> tuple[Phase, ...]:
    phases = tuple(parse_phase(part) for part in text.split("/") if part.strip())
    if not phases:
        raise PhaseError("phases: at least one phase is needed")
    return phases


def phase_at(phases: tuple[Phase, ...], t: float) -> tuple[int, Phase, float]:
    """(index, phase, seconds into it) at ``t`` seconds after ready; the list cycles."""
    cycle = sum(p.seconds for p in phases)
    x = t % cycle
    for i, phase in enumerate(phases):
        if x < phase.seconds:
            return i, phase, x
        x -= phase.seconds
    return len(phases) - 1, phases[-1], phases[-1].seconds
