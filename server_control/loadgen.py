"""Load generator against the OpenAI-compatible API of SGLang (or the simulator).

Closed loop: ``concurrency`` clients each send streaming /v1/completions requests back to
back. Tokens are counted as they arrive (from `usage` in every chunk when the server sends
continuous usage stats, else one per chunk) and only inside the measuring window, after
a warm-up, so throughput is the steady state at that concurrency.

A sweep runs each concurrency once per mode (speculative, target-only; forced through
/set_internal_state) and reports per-mode throughput and the crossover: the smallest
concurrency at which target-only out-produces speculation. Where the server publishes
the patch's metrics (``--enable-metrics``), each level also says what the server did in
the window: decode steps per mode, switches, and the accept length over speculative steps.
"""
from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from server_control.protocol import decision, spec_metrics

PROMPT = "Summarise the trade-offs of speculative decoding under heavy load. " * 4


@dataclass
class LevelResult:
    concurrency: int
    mode: str
    tokens: int = 0
    window_s: float = 0.0
    tok_s: float = 0.0
    completed: int = 0
    errors: int = 0
    error_sample: str | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    chunk_gap_p50_s: float | None = None
    server: dict[str, Any] | None = None  # the patch's /metrics over the window (spec_metrics.window)
    ttfts: list[Any] = field(default_factory=list, repr=False)
    gaps: list[Any] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("ttfts")
        out.pop("gaps")
        return out


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def headers(api_key: str | None) -> dict[str, Any]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


async def _one_request(client: httpx.AsyncClient, url: str, body: dict[str, Any], result: LevelResult,
                       window: tuple[float, float], api_key: str | None) -> None:
    start = time.monotonic()
    last = None
    seen = 0
    async with client.stream("POST", url + "/v1/completions", json=body, headers=headers(api_key)) as resp:
        if resp.status_code != 200:
            await resp.aread()
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]}")
        async for line in resp.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            now = time.monotonic()
            chunk = json.loads(line[6:])
            usage = chunk.get("usage")
            if usage and isinstance(usage.get("completion_tokens"), int):
                n = usage["completion_tokens"] - seen
                seen = usage["completion_tokens"]
            else:
                n = 1 if chunk.get("choices") and chunk["choices"][0].get("text") else 0
                seen += n
            if n <= 0:
                continue
            if last is None:
                result.ttfts.append(now - start)
            elif window[0] <= now <= window[1]:
                result.gaps.append(now - last)
            last = now
            if window[0] <= now <= window[1]:
                result.tokens += n
    if window[0] <= time.monotonic() <= window[1]:
        result.completed += 1


async def run_level(url: str, concurrency: int, *, warmup_s: float = 3.0, measure_s: float = 10.0,
                    max_tokens: int = 256, api_key: str | None = None, mode: str = "auto",
                    model: str | None = None, request_timeout_s: float = 600.0) -> LevelResult:
    """Steady-state throughput at one concurrency."""
    url = url.rstrip("/")
    result = LevelResult(concurrency, mode)
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "temperature": 0.0, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if model:
        body["model"] = model
    t0 = time.monotonic()
    window = (t0 + warmup_s, t0 + warmup_s + measure_s)
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(request_timeout_s, connect=10.0),
                                 limits=limits) as client:
        async def worker() -> None:
            while time.monotonic() < window[1]:
                try:
                    await _one_request(client, url, body, result, window, api_key)
                except (httpx.HTTPError, RuntimeError, ValueError) as exc:
                    result.errors += 1
                    result.error_sample = result.error_sample or f"{type(exc).__name__}: {exc}"
                    await asyncio.sleep(0.2)
        tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await asyncio.sleep(max(0.0, window[0] - time.monotonic()))
        before = await server_totals(client, url)
        await asyncio.sleep(max(0.0, window[1] - time.monotonic()))
        result.server = spec_metrics.window(before, await server_totals(client, url))
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    result.window_s = measure_s
    result.tok_s = result.tokens / measure_s
    result.ttft_p50_s = _quantile(result.ttfts, 0.5)
    result.ttft_p99_s = _quantile(result.ttfts, 0.99)
    result.chunk_gap_p50_s = statistics.median(result.gaps) if result.gaps else None
    return result


async def server_totals(client: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """The patch's counters on the server's /metrics, or None (no metrics, stock SGLang)."""
    try:
        resp = await client.get(url + "/metrics", timeout=5.0)
    except httpx.HTTPError:
        return None
    return spec_metrics.read_totals(resp.text) if resp.status_code == 200 else None


async def set_force(url: str, mode: str, api_key: str | None = None) -> bool:
    """Force a mode through /set_internal_state: the name first, then the mode's index when the
    server refuses a string (SGLang 0.5.23 types the values as numbers: 400; others 422)."""
    async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
        for value in (mode, decision.FORCE_CHOICES.index(mode)):
            resp = await client.post(url.rstrip("/") + "/set_internal_state", headers=headers(api_key),
                                     json={"server_args": {decision.FORCE_KEY: value}})
            if resp.status_code in (400, 422) and isinstance(value, str):
                continue
            body = resp.json() if resp.status_code == 200 else None
            return isinstance(body, list) and bool(body) and all(x is True for x in body)
    return False


def crossover(per_mode: dict[str, list[dict[str, Any]]]) -> int | None:
    """Smallest concurrency at which target-only beats speculative (None if never)."""
    spec = {r["concurrency"]: r["tok_s"] for r in per_mode.get(decision.SPECULATIVE, [])}
    plain = {r["concurrency"]: r["tok_s"] for r in per_mode.get(decision.TARGET_ONLY, [])}
    for c in sorted(set(spec) & set(plain)):
        if plain[c] > spec[c]:
            return int(c)
    return None


async def sweep(url: str, levels: list[int], *, modes: Sequence[str] = (decision.SPECULATIVE, decision.TARGET_ONLY),
                warmup_s: float = 3.0, measure_s: float = 10.0, max_tokens: int = 256,
                api_key: str | None = None, admin_api_key: str | None = None,
                progress: Callable[[LevelResult], None] | None = None) -> dict[str, Any]:
    """Per-mode throughput at each concurrency and the crossover. Restores force=auto."""
    per_mode: dict[str, list[dict[str, Any]]] = {}
    notes = []
    try:
        for mode in modes:
            if mode != decision.AUTO and not await set_force(url, mode, admin_api_key or api_key):
                notes.append(f"the server refused {decision.FORCE_KEY}={mode}; measured without forcing")
                mode_label = f"{mode} (not forced)"
            else:
                mode_label = mode
            rows = per_mode.setdefault(mode, [])
            for c in levels:
                r = await run_level(url, c, warmup_s=warmup_s, measure_s=measure_s, max_tokens=max_tokens,
                                    api_key=api_key, mode=mode_label)
                rows.append(r.summary())
                if progress:
                    progress(r)
    finally:
        if any(m != decision.AUTO for m in modes):
            await set_force(url, decision.AUTO, admin_api_key or api_key)
    cross = crossover(per_mode)
    return {"url": url, "levels": list(levels), "per_mode": per_mode, "crossover": cross,
            "suggested_threshold": None if cross is None else max(1, previous_level(levels, cross)),
            "notes": notes}


def previous_level(levels: list[int], level: int) -> int:
    """The threshold to set: the largest measured concurrency below the crossover."""
    below = [c for c in levels if c < level]
    return max(below) if below else level - 1
