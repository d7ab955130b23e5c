"""The simulated clock and a request as the scheduler holds it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


class SimClock:
    """Simulated seconds since start = wall seconds * scale."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.t0 = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self.t0) * self.scale

    def wall_delay(self, sim_t: float) -> float:
        return max(0.0, (sim_t - self.now()) / self.scale)


@dataclass(eq=False)
class Request:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    internal: bool = False
    created: float = 0.0  # simulated clock
    generated: int = 0
    spec_steps: int = 0  # speculative verify steps this request took part in
    spec_tokens: int = 0  # tokens produced in those steps
    cold_debt: int = 0  # speculative steps still without an accepted draft (a cold stretch)
    first_token_at: float | None = None
    admitted_at: float | None = None  # simulated clock: taken from the queue into a batch
    last_token_at: float | None = None  # simulated clock: its latest tokens (the inter-token latency)
    finished: bool = False
    error: str | None = None
    waiter: asyncio.Event | None = None  # set by the HTTP layer; passed to the deliver callback

    @property
    def spec_accept_length(self) -> float:
        return self.spec_tokens / self.spec_steps if self.spec_steps else 1.0
