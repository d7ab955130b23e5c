"""A server's cost curves and threshold, read from ``/server_info`` (capped, with a deadline)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from server_control.advice.words import Advice, advise
from server_control.protocol.cost_curves import SNAPSHOT_KEY, Curves, CurvesError, parse
from server_control.protocol.crossover import estimate

MAX_BYTES = 4 << 20


class SourceError(Exception):
    pass


@dataclass(frozen=True)
class Reading:
    url: str
    model: str | None
    threshold: int | None
    force: str | None
    curves: Curves


def read_server(url: str, api_key: str | None = None, timeout_s: float = 5.0) -> Reading:
    """GET ``/server_info``; SourceError saying what failed (no answer, too big, no curves)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    where = url.rstrip("/") + "/server_info"
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as client, client.stream("GET", where, headers=headers) as resp:
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise SourceError(f"{where}: answer larger than {MAX_BYTES} bytes")
            if resp.status_code != 200:
                raise SourceError(f"{where}: HTTP {resp.status_code}")
    except httpx.HTTPError as exc:
        raise SourceError(f"{where}: {type(exc).__name__}: {exc}") from None
    try:
        info = json.loads(bytes(body))
    except ValueError as exc:
        raise SourceError(f"{where}: not JSON ({exc})") from None
    states = info.get("internal_states") if isinstance(info, dict) else None
    live = states[0].get("dynamic_speculation") if isinstance(states, list) and states and isinstance(states[0], dict) else None
    model = info.get("served_model_name") or info.get("model_path") if isinstance(info, dict) else None
    return reading_of(url, model if isinstance(model, str) else None, live)


def reading_of(url: str, model: str | None, live: object) -> Reading:
    """The reading from a server's first rank's ``dynamic_speculation`` state (``live``), as
    ``/server_info`` gave it (a poll already made); SourceError saying what is missing."""
    where = url.rstrip("/") + "/server_info"
    if not isinstance(live, dict):
        raise SourceError(f"{where}: no dynamic_speculation state (not a patched server?)")
    if SNAPSHOT_KEY not in live:
        why = live.get("reason") or "this server's patch publishes no cost curves"
        raise SourceError(f"{where}: no {SNAPSHOT_KEY} in dynamic_speculation ({why})")
    try:
        curves = parse(live[SNAPSHOT_KEY])
    except CurvesError as exc:
        raise SourceError(f"{where}: {exc}") from None
    threshold = live.get("threshold")
    return Reading(
        url,
        model,
        threshold if isinstance(threshold, int) and not isinstance(threshold, bool) else None,
        live.get("force") if isinstance(live.get("force"), str) else None,
        curves,
    )


def advice_of(reading: Reading) -> Advice:
    """Estimate and advise (CPU: the bootstrap interval; run it in a thread)."""
    return advise(estimate(reading.curves), reading.threshold)


def read_advice(url: str, api_key: str | None = None) -> Advice:
    """Blocking (run it in a thread): read the server's curves, estimate, advise. SourceError if unreadable."""
    return advice_of(read_server(url, api_key))
