"""Crash-restart policy: capped exponential backoff and a start limit (systemd-like).

    policy = RestartPolicy(initial_s=1, max_s=30, burst=5, window_s=60)
    policy.record_start(now)               # every start, the first launch included
    decision = policy.after_crash(now, ran_for_s)  # -> ("restart", delay_s) | ("fatal", reason)

Backoff: the n-th consecutive crash waits min(initial * 2**(n-1), max) before the next start.
Start limit: at most ``burst`` starts within ``window_s``; a restart that would be start
number burst+1 inside the window is refused and the run becomes FATAL.
A run that stays up for ``window_s`` resets the consecutive-crash count.
Pure logic: no clocks are read here, the caller passes ``now`` (time.monotonic()).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from server_control.model.vocabulary import RunState


@dataclass
class RestartPolicy:
    initial_s: float = 1.0
    max_s: float = 30.0
    burst: int = 5
    window_s: float = 60.0
    enabled: bool = True
    starts: deque[Any] = field(default_factory=deque)
    consecutive_crashes: int = 0

    @classmethod
    def from_profile(cls, restart: dict[str, Any]) -> RestartPolicy:
        return cls(
            initial_s=restart["backoff_initial_s"],
            max_s=restart["backoff_max_s"],
            burst=restart["burst"],
            window_s=restart["window_s"],
            enabled=restart["enabled"],
        )

    def record_start(self, now: float) -> None:
        self.starts.append(now)
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.starts and now - self.starts[0] > self.window_s:
            self.starts.popleft()

    def delay_for(self, n: int) -> float:
        """Backoff before the restart that follows the n-th consecutive crash (n >= 1)."""
        return float(min(self.initial_s * (2 ** max(0, n - 1)), self.max_s))

    def after_crash(self, now: float, ran_for_s: float | None = None) -> tuple[str, float | str]:
        """(RunState.FATAL, why) or ("restart", delay_s)."""
        if ran_for_s is not None and ran_for_s >= self.window_s:
            self.consecutive_crashes = 0
        self.consecutive_crashes += 1
        if not self.enabled:
            return RunState.FATAL, "restart disabled in the profile ([restart] enabled = false)"
        delay = self.delay_for(self.consecutive_crashes)
        # The restart would happen at now + delay: count the starts in the window ending then.
        self._trim(now + delay)
        if len(self.starts) >= self.burst:
            return RunState.FATAL, (f"start limit hit: {len(self.starts)} starts within {self.window_s:g} s (burst {self.burst})")
        return "restart", delay
