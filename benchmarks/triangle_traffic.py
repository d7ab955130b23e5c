"""Closed-loop clients whose number walks a triangle over a range of concurrencies (the
benchmarks' mixed traffic on the real rig: the decode batch spans a threshold)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx

from server_control.bench import loadgen
from server_control.protocol import decision


def triangle(lo: int, hi: int) -> list[int]:
    """Every concurrency from ``lo`` up to ``hi`` and back down (one cycle, ends excluded once)."""
    if lo > hi or lo < 1:
        raise ValueError(f"want 1 <= lo <= hi, got {lo}, {hi}")
    up = list(range(lo, hi + 1))
    return up + up[-2:0:-1]


async def walk_triangle(
    url: str,
    schedule: Sequence[int],
    hold_s: float,
    seconds: float,
    max_tokens: int,
    every_s: float,
    tick: Callable[[float], Awaitable[None]],
) -> loadgen.LevelResult:
    """Closed-loop clients whose number walks ``schedule`` (``hold_s`` at each count) for
    ``seconds``; ``tick(elapsed)`` awaited every ``every_s`` seconds on the way. Failed
    requests are counted (and the first kept) in the result, never raised."""
    result = loadgen.LevelResult(max(schedule), decision.AUTO)
    body = loadgen.stream_body(max_tokens)
    t0 = time.monotonic()
    end = t0 + seconds
    span = (t0, end)
    active = [schedule[0]]
    limits = httpx.Limits(max_connections=max(schedule) + 4)
    async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(600.0, connect=10.0), limits=limits) as client:

        async def worker(i: int) -> None:
            while time.monotonic() < end:
                if i >= active[0]:
                    await asyncio.sleep(0.05)
                    continue
                try:
                    await loadgen._one_request(client, url, body, result, span, None)
                except (httpx.HTTPError, RuntimeError, ValueError) as exc:
                    result.errors += 1
                    result.error_sample = result.error_sample or f"{type(exc).__name__}: {exc}"
                    await asyncio.sleep(0.2)

        tasks = [asyncio.create_task(worker(i)) for i in range(max(schedule))]
        next_tick = t0 + every_s
        try:
            k = 0
            while time.monotonic() < end:
                active[0] = schedule[k % len(schedule)]
                k += 1
                await asyncio.sleep(max(0.0, min(hold_s, end - time.monotonic())))
                if time.monotonic() >= next_tick and time.monotonic() < end:
                    next_tick += every_s
                    await tick(time.monotonic() - t0)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return result
