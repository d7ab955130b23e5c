"""What the server itself says about a benchmark window (the load generator's referee).

Client tok/s alone cannot tell a slow mode from a window polluted by the previous one, nor
a forced mode from one the server ignored. Three reads, each with a deadline and a size cap:

  * ``idle``: ``/v1/loads`` ``num_running_reqs`` + ``num_waiting_reqs`` over DP ranks,
    live from the scheduler. ``drain`` waits until both are 0 (the previous window's
    cancelled streams finished or were aborted) before a window starts.
  * ``counters``: SGLang's own per-forward counter ``sglang:cuda_graph_passes_total``
    (``mode`` decode_* / prefill_*; incremented at every decode and prefill forward when the
    server runs ``--enable-metrics``, live through prometheus' multiprocess files) and the
    patch's live switch state in ``/server_info`` (``dynamic_speculation``: decode steps and
    seconds per mode, the forced mode, the threshold), exact at any moment (the patch's own
    ``/metrics`` counters are published every ``--decode-log-interval`` steps only).
  * ``window(before, after, seconds)``: decode steps in the window, milliseconds per decode
    step (the window over SGLang's decode passes: a plain and a patched server measured
    alike), the share of steps target-only and the patch's own milliseconds per step by mode.

``share_problem(mode, window)`` is the assertion: a forced arm whose steps did not all run
in that mode is a broken measurement, named, never a figure.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from server_control.net.lean_httpx import httpx
from server_control.protocol import decision

MAX_BODY = 4 * 1024 * 1024  # bytes read from /metrics or /server_info, at most
PASSES = "sglang:cuda_graph_passes_total"


@dataclass(frozen=True)
class Counters:
    """A read of the server's step counters at one moment (None: not published)."""

    at: float  # time.monotonic() of the read
    decode_passes: float | None  # SGLang: decode forwards (all ranks' TP0)
    prefill_passes: float | None  # SGLang: prefill/extend forwards
    steps: dict[str, int] | None  # the patch: decode steps per mode
    seconds: dict[str, float] | None  # the patch: seconds between steps, per mode
    force: str | None
    threshold: int | None
    cold_steps: int | None = None  # the patch: target-only steps that skipped the draft's extend


async def _get(client: httpx.AsyncClient, url: str, timeout: float) -> tuple[int, bytes]:
    async with client.stream("GET", url, timeout=timeout) as resp:
        body = b""
        async for chunk in resp.aiter_bytes():
            body += chunk
            if len(body) > MAX_BODY:
                raise ValueError(f"{url}: answer over {MAX_BODY} bytes")
        return resp.status_code, body


async def idle(client: httpx.AsyncClient, url: str) -> int | None:
    """Running + waiting requests over DP ranks (``/v1/loads``), None if not published."""
    import json

    try:
        status, body = await _get(client, url + "/v1/loads?include=core", 5.0)
        data = json.loads(body) if status == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    loads = data.get("loads") if isinstance(data, dict) else None
    if not isinstance(loads, list) or not loads:
        return None
    total = 0
    for entry in loads:
        for key in ("num_running_reqs", "num_waiting_reqs"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if not isinstance(value, (int, float)):
                return None
            total += int(value)
    return total


async def drain(client: httpx.AsyncClient, url: str, timeout_s: float = 120.0, poll_s: float = 0.05) -> float | None:
    """Wait until the server runs and queues nothing; seconds waited, None when the server
    does not say (no ``/v1/loads``). Raises TimeoutError naming the server after
    ``timeout_s``."""
    t0 = time.monotonic()
    while True:
        left = await idle(client, url)
        if left is None:
            return None
        if left == 0:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"{url} still runs {left} requests after {timeout_s:.0f} s")
        await asyncio.sleep(poll_s)


def _passes(text: str) -> tuple[float | None, float | None]:
    from prometheus_client.parser import text_string_to_metric_families

    decode = prefill = None
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name != PASSES or s.labels.get("tp_rank", "0") != "0":
                    continue
                kind = s.labels.get("mode", "")
                if kind.startswith("decode"):
                    decode = (decode or 0.0) + s.value
                elif kind.startswith("prefill"):
                    prefill = (prefill or 0.0) + s.value
    except Exception:  # noqa: BLE001 - garbage exposition: nothing read
        return None, None
    return decode, prefill


@dataclass(frozen=True)
class SwitchCounters:
    """The patch's part of a read: its counters summed over the DP groups' switch states of
    ``/server_info`` (all None without them)."""

    steps: dict[str, int] | None = None  # decode steps per mode
    seconds: dict[str, float] | None = None  # seconds between steps, per mode
    force: str | None = None
    threshold: int | None = None
    cold_steps: int | None = None


def _switch_state(info: Any) -> SwitchCounters:
    """The patch's counters in a ``/server_info`` answer (all None without them)."""
    states = info.get("internal_states") if isinstance(info, dict) else None
    snaps: list[dict[str, Any]] = []
    for state in states or []:
        snap = state.get("dynamic_speculation") if isinstance(state, dict) else None
        if isinstance(snap, dict) and isinstance(snap.get("steps"), dict):
            snaps.append(snap)
    if not snaps:
        return SwitchCounters()
    steps = {m: sum(int(s["steps"].get(m, 0)) for s in snaps) for m in decision.MODES}
    seconds = {m: float(sum(float((s.get("seconds") or {}).get(m, 0.0)) for s in snaps)) for m in decision.MODES}
    force = snaps[0].get("force")
    threshold = snaps[0].get("threshold")
    colds = [s.get("cold_steps") for s in snaps]
    cold = sum(int(c) for c in colds if isinstance(c, int)) if any(isinstance(c, int) for c in colds) else None
    return SwitchCounters(
        steps,
        seconds,
        force if isinstance(force, str) else None,
        threshold if isinstance(threshold, int) else None,
        cold,
    )


async def counters(client: httpx.AsyncClient, url: str) -> Counters:
    """One read of both counter sources (each None where the server does not publish it)."""
    import json

    at = time.monotonic()
    decode = prefill = None
    try:
        status, body = await _get(client, url + "/metrics", 5.0)
        if status == 200:
            decode, prefill = _passes(body.decode(errors="replace"))
    except (httpx.HTTPError, ValueError):
        pass
    patch = SwitchCounters()
    try:
        status, body = await _get(client, url + "/server_info", 10.0)
        if status == 200:
            patch = _switch_state(json.loads(body))
    except (httpx.HTTPError, ValueError):
        pass
    return Counters(at, decode, prefill, patch.steps, patch.seconds, patch.force, patch.threshold, patch.cold_steps)


def window(before: Counters | None, after: Counters | None, seconds: float | None = None) -> dict[str, Any] | None:
    """What the server did between two reads (``seconds``: the window, default the time
    between the reads)."""
    if before is None or after is None:
        return None
    span = seconds if seconds is not None else after.at - before.at
    out: dict[str, Any] = {
        "decode_passes": None,
        "prefill_passes": None,
        "ms_per_step": None,
        "steps": None,
        "target_only_share": None,
        "ms_per_step_by_mode": None,
        "force": after.force,
        "threshold": after.threshold,
        "cold_steps": None,
    }
    if before.cold_steps is not None and after.cold_steps is not None:
        out["cold_steps"] = after.cold_steps - before.cold_steps
    if before.decode_passes is not None and after.decode_passes is not None:
        n = after.decode_passes - before.decode_passes
        out["decode_passes"] = n
        out["ms_per_step"] = 1000 * span / n if n > 0 else None
    if before.prefill_passes is not None and after.prefill_passes is not None:
        out["prefill_passes"] = after.prefill_passes - before.prefill_passes
    if before.steps is not None and after.steps is not None:
        steps = {m: after.steps[m] - before.steps[m] for m in decision.MODES}
        total = sum(steps.values())
        out["steps"] = steps
        out["target_only_share"] = steps[decision.TARGET_ONLY] / total if total else None
        if before.seconds is not None and after.seconds is not None:
            out["ms_per_step_by_mode"] = {
                m: round(1000 * (after.seconds[m] - before.seconds[m]) / steps[m], 3) if steps[m] else None
                for m in decision.MODES
            }
    return out


def share_problem(mode: str, win: dict[str, Any] | None) -> str | None:
    """Why a forced arm's window is not what it claims to be (None: it is, or nothing to
    check: auto, or a server without the patch's counters)."""
    if mode not in (decision.SPECULATIVE, decision.TARGET_ONLY) or win is None:
        return None
    share = win.get("target_only_share")
    if win.get("steps") is None:
        return None
    if share is None:
        return f"forced {mode}: the server took no decode step in the window"
    want = 1.0 if mode == decision.TARGET_ONLY else 0.0
    if share != want:
        return f"forced {mode}: {share:.1%} of the window's decode steps ran target-only (steps {win['steps']})"
    if win.get("force") not in (None, mode):
        return f"forced {mode}: the server reports force={win['force']}"
    return None


def as_dict(c: Counters) -> dict[str, Any]:
    return asdict(c)
