"""Exploration: now and then, run the other mode for one decode step near the threshold.

In auto mode each batch size is seen in one mode only (speculative at or below N,
target-only above), so the other side of the boundary is unknown to the cost curves.
With a share s > 0, a decode step whose batch lies within ``window(N)`` of N runs the
other mode when its step number hashes below s, so at most s of all steps explore (only
steps near N can). Modes are token-exact: exploration changes speed only.

The choice depends only on the step number, the batch and N, which every TP rank holds
alike (every rank sees the same batches), never on timings: every rank flips the same
steps. Standard library only, shared by the simulator and the SGLang patch.

Learning: right after N changes (and at start) nothing is known on the other side of the
new boundary, and at share s a bucket near N would take minutes to collect enough
explored steps. So, while s > 0, each batch of the window explores at ``LEARN_SHARE``
until it has ``LEARN_STEPS`` explored steps since N last changed, then at s: a bounded
burst of at most ``LEARN_STEPS`` x 2w explored steps per change of N (the counts, like
the choice, depend only on step numbers, batches and N: the same on every rank).
"""

from __future__ import annotations

SPECULATIVE = "speculative"
TARGET_ONLY = "target_only"
SHARE_KEY = "speculative_disable_explore_share"  # the patch's flag / internal-state key
SNAPSHOT_KEY = "exploration"  # in dynamic_speculation: share, window, explored_steps
MAX_SHARE = 0.1
LEARN_SHARE = 0.2  # the share of a window batch's steps that explore while it learns
LEARN_STEPS = 10  # explored steps per window batch, per value of N, at LEARN_SHARE
_HASH = 2654435761  # Knuth's multiplicative hash: step numbers spread evenly over 2^32
_SPAN = 1 << 32
_LEARN_CUT = int(LEARN_SHARE * _SPAN)


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
    __slots__ = ("share", "_cut", "explored", "learnt_n", "_learnt")

    def __init__(self, share: object = 0.0) -> None:
        self.share = validate_share(share)
        self._cut = int(self.share * _SPAN)
        self.explored = 0
        self.learnt_n = -1  # the N the learning counts are for
        self._learnt: list[int] = []  # explored steps per window batch (N-w+1 ..) at that N

    def set_share(self, value: object) -> str:
        old = self.share
        self.share = validate_share(value)
        self._cut = int(self.share * _SPAN)
        return f"Dynamic speculation: exploration share changed {old:g} -> {self.share:g}"

    def snapshot(self, threshold: int) -> dict[str, object]:
        """Published in ``dynamic_speculation.exploration`` (simulator and patch alike)."""
        return {"share": self.share, "window": window(threshold), "explored_steps": self.explored}

    def mode(self, chosen: str, step: int, batch: int, threshold: int, auto: bool = True) -> str:
        """The mode step number ``step`` of ``batch`` runs in, given the switch chose ``chosen``."""
        if not self._cut or not auto or threshold <= 0 or batch <= 0:
            return chosen
        w = window(threshold)
        if batch <= threshold - w or batch > threshold + w:
            return chosen
        if threshold != self.learnt_n:
            self.learnt_n, self._learnt = threshold, [0] * (2 * w)
        k = batch - threshold + w - 1
        learning = self._learnt[k] < LEARN_STEPS
        if (step * _HASH) % _SPAN >= (_LEARN_CUT if learning else self._cut):
            return chosen
        if learning:
            self._learnt[k] += 1
        self.explored += 1
        return TARGET_ONLY if chosen == SPECULATIVE else SPECULATIVE
