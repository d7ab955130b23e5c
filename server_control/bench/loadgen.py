"""Load generator against the OpenAI-compatible API of SGLang (or the simulator).

Closed loop: ``concurrency`` clients each send streaming /v1/completions requests back to
back. Tokens are counted as they arrive (from `usage` in every chunk when the server sends
continuous usage stats, else one per chunk) and only inside the measuring window, after
a warm-up, so throughput is the steady state at that concurrency.

A sweep measures, level by level, ``rounds`` rounds in which every mode runs one window
(speculative, target-only, auto; forced through /set_internal_state), the order rotated
each round, so a shared machine's drift and whatever one arm leaves behind fall on every
arm alike. Before each window the server is drained (``referee.drain``: no running or
waiting request left from the arm before). Each window also records what the server says
it did (``referee``): its decode passes and milliseconds per decode step, the share
of steps target-only (a forced arm that did not run all its steps in its mode is a
problem, reported, never a figure), and, with the patch's metrics, switches and the
accept length over speculative steps. Each level's cell is the median of its rounds;
every round is kept. The crossover is the smallest concurrency at which target-only
out-produces speculation.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from server_control.bench import referee
from server_control.net import tls
from server_control.net.http import client_limits
from server_control.net.lean_httpx import httpx
from server_control.protocol import decision, spec_metrics

_T = TypeVar("_T")  # an arm: its name, or a concurrency

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
    steps: dict[str, Any] | None = None  # the server's step counters (referee.window)
    leftover: int | None = None  # requests the server still ran when this window began
    drain_s: float | None = None  # waited for the server to be idle (None: it cannot say)
    problem: str | None = None  # the window is not what its mode claims
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


async def _one_request(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    result: LevelResult,
    window: Sequence[float],  # [start, end]: read at every token (run_level sets it late)
    api_key: str | None,
) -> None:
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


def stream_body(max_tokens: int, model: str | None = None) -> dict[str, Any]:
    """One streamed greedy completion of ``max_tokens`` (EOS ignored), usage in every chunk:
    what every load of ours sends."""
    body: dict[str, Any] = {
        "prompt": PROMPT,
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if model:
        body["model"] = model
    return body


async def run_level(
    url: str,
    concurrency: int,
    *,
    warmup_s: float = 3.0,
    measure_s: float = 10.0,
    max_tokens: int = 256,
    api_key: str | None = None,
    mode: str = "auto",
    model: str | None = None,
    request_timeout_s: float = 600.0,
    drain: bool = True,
) -> LevelResult:
    """Steady-state throughput at one concurrency; ``drain``: wait first until the server
    runs nothing (what an earlier window left behind would otherwise share this one)."""
    url = url.rstrip("/")
    result = LevelResult(concurrency, mode)
    body = stream_body(max_tokens, model)
    limits = client_limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(
        trust_env=False, verify=tls.shared(), timeout=httpx.Timeout(request_timeout_s, connect=10.0), limits=limits
    ) as client:
        result.leftover = await referee.idle(client, url)
        if drain:
            result.drain_s = await referee.drain(client, url)
        # [start, end], set once the start counters are in (until then nothing is counted
        # and the clients keep going): a server, or this process, slow to answer them must
        # not shorten or empty the window it measures
        window = [math.inf, math.inf]

        async def worker() -> None:
            while time.monotonic() < window[1]:
                try:
                    await _one_request(client, url, body, result, window, api_key)
                except (httpx.HTTPError, RuntimeError, ValueError) as exc:
                    result.errors += 1
                    result.error_sample = result.error_sample or f"{type(exc).__name__}: {exc}"
                    await asyncio.sleep(0.2)

        tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await asyncio.sleep(warmup_s)
        start = await referee.counters(client, url)
        before = await server_totals(client, url)
        opened = time.monotonic()
        window[:] = [opened, opened + measure_s]
        await asyncio.sleep(measure_s)
        end = await referee.counters(client, url)
        result.server = spec_metrics.window(before, await server_totals(client, url))
        result.steps = referee.window(start, end)
        result.problem = referee.share_problem(mode, result.steps)
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
    async with httpx.AsyncClient(trust_env=False, verify=tls.shared(), timeout=10.0, limits=client_limits()) as client:
        for value in (mode, decision.FORCE_CHOICES.index(mode)):
            resp = await _post_setting(client, url, decision.FORCE_KEY, value, api_key)
            if resp.status_code in (400, 422) and isinstance(value, str):
                continue
            return _every_rank_took(resp)
    return False


async def set_setting(url: str, key: str, value: int, api_key: str | None = None) -> bool:
    """Set one integer runtime setting through /set_internal_state on every rank."""
    async with httpx.AsyncClient(trust_env=False, verify=tls.shared(), timeout=10.0, limits=client_limits()) as client:
        return _every_rank_took(await _post_setting(client, url, key, value, api_key))


async def _post_setting(client: httpx.AsyncClient, url: str, key: str, value: object, api_key: str | None) -> httpx.Response:
    body = {"server_args": {key: value}}
    return await client.post(url.rstrip("/") + "/set_internal_state", headers=headers(api_key), json=body)


def _every_rank_took(resp: httpx.Response) -> bool:
    """SGLang answers a setting with one boolean per rank: true from every one, or refused."""
    body = resp.json() if resp.status_code == 200 else None
    return isinstance(body, list) and bool(body) and all(x is True for x in body)


def crossover(per_mode: dict[str, list[dict[str, Any]]]) -> int | None:
    """Smallest concurrency at which target-only beats speculative (None if never)."""
    spec = {r["concurrency"]: r["tok_s"] for r in per_mode.get(decision.SPECULATIVE, [])}
    plain = {r["concurrency"]: r["tok_s"] for r in per_mode.get(decision.TARGET_ONLY, [])}
    for c in sorted(set(spec) & set(plain)):
        if plain[c] > spec[c]:
            return int(c)
    return None


def rotated(modes: Sequence[_T], round_index: int) -> list[_T]:
    """The arms' order in round ``round_index``: each round starts one arm later."""
    k = round_index % len(modes) if modes else 0
    return [*modes[k:], *modes[:k]]


def level_cell(concurrency: int, mode: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One level of one mode over its rounds: the median tok/s and ms per decode step, the
    target-only share of all its steps, every round kept."""
    values = sorted(r["tok_s"] for r in rounds)
    ms = sorted(r["steps"]["ms_per_step"] for r in rounds if r.get("steps") and r["steps"].get("ms_per_step") is not None)
    steps = [r["steps"]["steps"] for r in rounds if r.get("steps") and r["steps"].get("steps")]
    total = sum(sum(s.values()) for s in steps)
    return {
        "concurrency": concurrency,
        "mode": mode,
        "tok_s": statistics.median(values),
        "tok_s_runs": values,
        "ms_per_step": statistics.median(ms) if ms else None,
        "ms_per_step_runs": ms,
        "target_only_share": (sum(s[decision.TARGET_ONLY] for s in steps) / total if total else None),
        "errors": sum(r["errors"] for r in rounds),
        "tokens": sum(r["tokens"] for r in rounds),
        "problems": [r["problem"] for r in rounds if r.get("problem")],
        "server": _published(rounds),
        "rounds": rounds,
    }


def _published(rounds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The patch's /metrics window of the last round that saw them published (they are
    published every --decode-log-interval steps: a short window may see none)."""
    with_steps = [r["server"] for r in rounds if r.get("server") and r["server"].get("target_only_share") is not None]
    return with_steps[-1] if with_steps else rounds[-1].get("server")


async def sweep(
    url: str,
    levels: list[int],
    *,
    modes: Sequence[str] = (decision.SPECULATIVE, decision.TARGET_ONLY),
    warmup_s: float = 3.0,
    measure_s: float = 10.0,
    max_tokens: int = 256,
    api_key: str | None = None,
    admin_api_key: str | None = None,
    rounds: int = 1,
    progress: Callable[[LevelResult], None] | None = None,
) -> dict[str, Any]:
    """Per-mode throughput at each concurrency, arms interleaved in every round (order
    rotated), the server drained before each window; the crossover. Restores force=auto."""
    per_mode: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    notes: list[str] = []
    refused: set[str] = set()
    forcing = any(m != decision.AUTO for m in modes)
    admin = admin_api_key or api_key
    try:
        for c in levels:
            done: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
            for k in range(max(1, rounds)):
                for mode in rotated(modes, k):
                    label = mode
                    if (forcing or mode != decision.AUTO) and not await set_force(url, mode, admin):
                        if mode not in refused:
                            notes.append(f"the server refused {decision.FORCE_KEY}={mode}; measured without forcing")
                        refused.add(mode)
                        label = f"{mode} (not forced)"
                    r = await run_level(
                        url, c, warmup_s=warmup_s, measure_s=measure_s, max_tokens=max_tokens, api_key=api_key, mode=label
                    )
                    row = r.summary()
                    row["round"], row["mode"] = k, mode
                    row["forced"] = label == mode
                    done[mode].append(row)
                    if progress:
                        progress(r)
            for mode in modes:
                per_mode[mode].append(level_cell(c, mode, done[mode]))
    finally:
        if forcing:
            await set_force(url, decision.AUTO, admin)
    cross = crossover(per_mode)
    problems = [p for rows in per_mode.values() for row in rows for p in row["problems"]]
    return {
        "url": url,
        "levels": list(levels),
        "rounds": max(1, rounds),
        "per_mode": per_mode,
        "crossover": cross,
        "suggested_threshold": None if cross is None else max(1, previous_level(levels, cross)),
        "notes": notes,
        "problems": problems,
    }


def previous_level(levels: list[int], level: int) -> int:
    """The threshold to set: the largest measured concurrency below the crossover."""
    below = [c for c in levels if c < level]
    return max(below) if below else level - 1
