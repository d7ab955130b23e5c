"""Exploration: now and then, run the other mode for one decode step near the threshold.

In auto mode each batch size is seen in one mode only (speculative at or below N,
target-only above), so the other side of the boundary is unknown to the cost curves.
With a share s > 0, a decode step whose batch lies within ``window(N)`` of N runs the
other mode when its step number hashes below s, so at most s of all steps explore (only
steps near N can). Modes are token-exact: exploration changes speed only.

The choice depends only on the step number, the batch and N, which every TP rank holds
alike (every rank sees the same batches), never on timings: every rank flips the same
steps. Standard library only, shared by the simulator and (later) the SGLang patch.
"""
from __future__ import annotations

SPECULATIVE = "speculative"
TARGET_ONLY = "target_only"
MAX_SHARE = 0.1
_HASH = 2654435761     # Knuth's multiplicative hash: step numbers spread evenly over 2^32
_SPAN = 1 << 32


def validate_share(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"exploration share must be a number 0..{MAX_SHARE}, got {value!r}")
    try:
        share = float(value)
    except ValueError:
        raise ValueError(f"exploration share must be a number 0..{MAX_SHARE}, got {value!r}") from None
    if not 0.0 <= share <= MAX_SHARE:
        raise ValueError(f"exploration share must be 0..{MAX_SHARE}, got {value!r}")
    return share


def window(threshold: int) -> int:
    """Batches each side of N that explore: N-w+1 .. N+w."""
    return max(3, (threshold + 1) // 2)


class Explorer:
    __slots__ = ("share", "_cut", "explored")

    def __init__(self, share: object = 0.0) -> None:
        self.share = validate_share(share)
        self._cut = int(self.share * _SPAN)
        self.explored = 0

    def set_share(self, value: object) -> str:
        old = self.share
        self.share = validate_share(value)
        self._cut = int(self.share * _SPAN)
        return f"Dynamic speculation: exploration share changed {old:g} -> {self.share:g}"

    def mode(self, chosen: str, step: int, batch: int, threshold: int, auto: bool = True) -> str:
        """The mode step number ``step`` of ``batch`` runs in, given the switch chose ``chosen``."""
        if not self._cut or not auto or threshold <= 0 or batch <= 0:
            return chosen
        w = window(threshold)
        if batch <= threshold - w or batch > threshold + w:
            return chosen
        if (step * _HASH) % _SPAN >= self._cut:
            return chosen
        self.explored += 1
        return TARGET_ONLY if chosen == SPECULATIVE else SPECULATIVE
