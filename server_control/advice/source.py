"""A server's cost curves and threshold, read from ``/server_info`` (capped, with a deadline).

``read_advice`` with a state dir (the supervising console's session) keeps the curves in
it (``store.py``): each answer is folded into the saved curves and the advice is given on
all of them (earlier runs of the server included); while the server does not answer, the
advice comes from the saved curves and its sentence says how old they are.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from server_control.advice import store
from server_control.advice.words import Advice, advise, duration, with_cold_caveat
from server_control.net import tls
from server_control.net.http import client_limits
from server_control.net.lean_httpx import httpx
from server_control.protocol.cost_curves import SNAPSHOT_KEY, Curves, CurvesError, parse
from server_control.protocol.crossover import estimate

MAX_BYTES = 4 << 20


class SourceError(Exception):
    pass


class NotReadYet(SourceError):
    """No poll has come back yet (a console just opened): not the server failing to answer."""


@dataclass(frozen=True)
class Reading:
    url: str
    model: str | None
    threshold: int | None
    force: str | None
    curves: Curves
    explore_share: float = 0.0  # dynamic_speculation.exploration.share (0: not exploring)
    cold_draft_above: int = 0  # dynamic_speculation.cold_draft_above (0: the draft kept warm)


async def _get_capped(where: str, headers: dict[str, str], timeout_s: float, deadline_s: float) -> bytes:
    """The body of a 200 answer, at most MAX_BYTES, complete within ``deadline_s`` overall
    (a server trickling a byte every 50 ms never trips the per-read timeout)."""
    try:
        async with asyncio.timeout(deadline_s):
            async with httpx.AsyncClient(
                timeout=timeout_s, trust_env=False, verify=tls.shared(), limits=client_limits()
            ) as client:
                async with client.stream("GET", where, headers=headers) as resp:
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_BYTES:
                            raise SourceError(f"{where}: answer larger than {MAX_BYTES} bytes")
                    if resp.status_code != 200:
                        raise SourceError(f"{where}: HTTP {resp.status_code}")
                    return bytes(body)
    except TimeoutError:
        raise SourceError(f"{where}: timed out (no complete answer within {deadline_s:g} s)") from None
    except httpx.HTTPError as exc:
        raise SourceError(f"{where}: {type(exc).__name__}: {exc}") from None


def read_server(url: str, api_key: str | None = None, timeout_s: float = 5.0, deadline_s: float | None = None) -> Reading:
    """GET ``/server_info`` (capped; within ``deadline_s`` overall, default 2 x ``timeout_s``);
    SourceError saying what failed (no answer, too big, too slow, no curves). Called from a
    thread without an event loop (the CLI, ``asyncio.to_thread``): it runs its own."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    where = url.rstrip("/") + "/server_info"
    body = asyncio.run(_get_capped(where, headers, timeout_s, 2.0 * timeout_s if deadline_s is None else deadline_s))
    try:
        info = json.loads(body)
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
        _share(live.get("exploration")),
        _mark(live.get("cold_draft_above")),
    )


def _mark(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _share(exploration: object) -> float:
    share = exploration.get("share") if isinstance(exploration, dict) else None
    return float(share) if isinstance(share, (int, float)) and not isinstance(share, bool) and share > 0 else 0.0


def poll_reading(url: str, reachable: bool, error: str | None, model: str | None, live: object) -> Reading:
    """The reading from a poll already made (its answer's first rank's state); SourceError
    when the poll was not answered or holds no curves."""
    if not reachable:
        if error is None:
            raise NotReadYet(f"{url.rstrip('/')}/server_info: not read yet")
        raise SourceError(error)
    return reading_of(url, model, live)


def read_advice(url: str, api_key: str | None = None, state_dir: str | Path | None = None) -> Advice:
    """Blocking (run it in a thread): read the server's curves, estimate, advise. SourceError
    if unreadable (and, with ``state_dir``, nothing saved either)."""
    home = None if state_dir is None else store.CurvesHome(Path(state_dir), url)
    return advice_from(lambda: read_server(url, api_key), url, home)


def advice_on(curves: Curves, reading: Reading | None) -> Advice:
    """The advice on ``curves`` (the reading's, or saved ones folded with it) for the server
    as ``reading`` found it (its N, its cold-draft mark); None: nothing read from it."""
    if reading is None:
        return advise(estimate(curves), None)
    return with_cold_caveat(advise(estimate(curves), reading.threshold), reading.cold_draft_above)


def advice_from(read: Callable[[], Reading], url: str, home: store.CurvesHome | None = None) -> Advice:
    """Blocking (a thread: the estimate's bootstrap): advise from ``read()``'s reading (a
    request, or a poll already made), kept in ``home`` when given."""
    if home is None:
        reading = read()
        return advice_on(reading.curves, reading)
    state_dir, key = home.state_dir, home.key
    try:
        reading = read()
    except SourceError as exc:
        try:
            saved = store.load(url, None, state_dir, key)
        except store.StoreError as bad:
            raise SourceError(f"{exc}; saved curves unreadable: {bad}") from None
        if saved is None:
            raise
        adv = advice_on(saved.total(), None)
        why = "server not read yet" if isinstance(exc, NotReadYet) else "server did not answer"
        return replace(
            adv, sentence=f"{adv.sentence} ({why}; from the curves saved {duration(saved.age_s())} ago)", saved_only=True
        )
    try:
        saved = store.update(url, reading.model, reading.curves, state_dir, key=key)
    except store.StoreError as bad:  # the live reading still advises; the file is named
        adv = advice_on(reading.curves, reading)
        return replace(adv, sentence=f"{adv.sentence} (curves not kept: {bad})")
    adv = advice_on(saved.total(), reading)
    if saved.base.buckets:
        age = duration(time.time() - saved.first_seen)
        adv = replace(adv, sentence=f"{adv.sentence} (includes curves from earlier server runs, first seen {age} ago)")
    return adv
