"""Poll a server's /server_info (and its load), paced so polls never overlap.

One request per poll where one serves: while the server's log (``records_fn``) brings a
fresh `Decode batch` line of every DP group between two polls, the load comes from those
lines and only /server_info is asked. Otherwise (idle, no log, an old log) the load comes
from /v1/loads?include=core,memory,spec; if that endpoint is missing or unusable, from
/metrics (parsed by prometheus_client's text parser); if that is missing too, from the
latest decode log records. A server that does not answer, answers late, or answers
garbage gives an unreachable sample with the reason and the URL; the next poll tries
again, so the state recovers by itself. While it is unreachable only fresh log lines give
a load (a dead server's last numbers are not shown as live).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from server_control.model.latency import LatencyStatus
from server_control.model.load import Load
from server_control.net import tls
from server_control.net.http import MAX_BODY_BYTES, auth_headers, bounded_request, client_limits, describe_error
from server_control.net.lean_httpx import httpx
from server_control.sanitize import loads_clean
from server_control.telemetry.latency import NO_HISTOGRAMS, LatencyWindows, mode_totals, read_histograms
from server_control.telemetry.lean_get import LeanGet
from server_control.telemetry.sample import (
    Sample,
    fresh_decode_load,
    load_from_loads,
    load_from_metrics,
    load_from_records,
    sample_from_server_info,
)

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1.0
DEFAULT_TIMEOUT_S = 2.0
FRESH_LOG_S = 3.0  # a decode line stamped longer ago than this (or 3 intervals) is not live
MIN_INTERVAL_S = 0.05
LATENCY_EVERY_S = 2.0  # /metrics for the latency windows: at most this often


IDLE_RECHECK = 5  # an idle server's load is asked again at least every this many polls
QUIET_AFTER = 5  # polls in a row that found the server idle and answering ...
QUIET_INTERVAL_S = 3.0  # ... after which it is polled this often, until anything changes


def decode_steps(sample: Sample) -> int | None:
    """Decode steps the server has taken (summed over ranks and modes, from the patch's
    ``dynamic_speculation.steps``); None when the server does not publish them."""
    total, seen = 0, False
    for rank in sample.ranks:
        steps = (rank.dynamic or {}).get("steps")
        if isinstance(steps, dict):
            seen = True
            total += sum(int(v) for v in steps.values() if isinstance(v, (int, float)))
    return total if seen else None


class HttpPoller:
    """``await poller.poll_once()`` -> Sample; ``await poller.run()`` loops until ``stop()``.

    ``on_sample(sample)`` is called after every poll. ``poke()`` makes the next poll start
    at once (used after a control request to read back quickly); it never overlaps a poll
    in progress.

    A server that answered ``QUIET_AFTER`` polls in a row with nothing running or queued and
    no decode step taken is polled every ``QUIET_INTERVAL_S`` (when ``interval_s`` is
    shorter) until a poll finds anything else; ``wake()`` (the session calls it on a log
    line that is not a poll) and ``poke()`` end the quiet at once.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        records_fn: Callable[[], list[Any]] | None = None,
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.interval_s = max(MIN_INTERVAL_S, float(interval_s))
        self.timeout_s = timeout_s
        self.records_fn = records_fn
        self.on_sample = on_sample
        self.last: Sample | None = None
        self.polls = 0
        self.requests = 0  # HTTP requests sent by polls (for the figures in docs/telemetry.md)
        self._log_seq = 0  # newest log record seen at the last poll
        self._log_primed = False
        self._client: httpx.AsyncClient | None = None
        self._lean: LeanGet | None = None  # plain http://: the poll's GETs (lean_get.py), not httpx
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._loads_ok = True  # flips to False after a 404, re-tried every 30 polls
        self._idle: tuple[Load, int, int] | None = None  # (idle load, decode steps then, polls since)
        self._metrics_ok = True
        self.latency = LatencyWindows()
        self._latency_ok = True  # False: no histograms (no --enable-metrics): asked every 30 polls
        self._latency_next = 0.0
        self._quiet_polls = 0  # polls in a row that found the server idle (see ``quiet``)
        self._quiet_steps: int | None = None  # decode steps at the first of them

    # -- HTTP ------------------------------------------------------------------------
    def client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                trust_env=False,
                verify=tls.shared(),
                timeout=self.timeout_s,
                headers=auth_headers(self.api_key),
                limits=client_limits(),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._lean is not None:
            await self._lean.aclose()

    def lean(self) -> LeanGet | None:
        """The GET of lean_get.py for a plain http:// server (a sixth of httpx's CPU a request);
        None for https:// (httpx)."""
        if self._lean is None and self.url.startswith("http://"):
            self._lean = LeanGet(self.url, auth_headers(self.api_key), self.timeout_s)
        return self._lean

    async def get(self, path: str) -> httpx.Response:
        self.requests += 1
        lean = self.lean()
        if lean is not None:
            resp = await lean.get(path, max_bytes=MAX_BODY_BYTES, deadline_s=2.0 * max(1.0, self.timeout_s))
        else:
            resp = await bounded_request(self.client(), "GET", self.url + path)
        resp.raise_for_status()
        return resp

    async def get_json(self, path: str) -> object:
        resp = await self.get(path)
        return loads_clean(resp.content.decode("utf-8"))  # shown later: terminal-safe now

    async def server_info(self) -> dict[str, Any]:
        try:
            body = await self.get_json("/server_info")
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise
            body = await self.get_json("/get_server_info")  # releases before the rename
        if not isinstance(body, dict):
            raise ValueError(f"/server_info: expected a JSON object, got {type(body).__name__}")
        return body

    async def _load(self, records: list[Any]) -> Load | None:
        retry = self.polls % 30 == 0
        if self._loads_ok or retry:
            try:
                load = load_from_loads(await self.get_json("/v1/loads?include=core,memory,spec"))
                self._loads_ok = load is not None
                if load:
                    return load
            except (httpx.HTTPError, ValueError, UnicodeDecodeError):
                self._loads_ok = False
        if self._metrics_ok or retry:
            try:
                resp = await self.get("/metrics")
                load = load_from_metrics(resp.text)
                self._metrics_ok = load is not None
                if load:
                    return load
            except httpx.HTTPError:
                self._metrics_ok = False
        return load_from_records(records) if records else None

    async def _latency(self, sample: Sample) -> LatencyStatus:
        """The latency windows, /metrics read at most every ``LATENCY_EVERY_S`` (and, on a
        server without the histograms, every 30 polls)."""
        now = time.monotonic()
        self.latency.watch_decode(sample.ts, sample.load.gen_throughput, sample.load.queue)
        self.latency.add_modes(time.time(), mode_totals(sample.ranks[0].dynamic) if sample.ranks else None)
        due = now >= self._latency_next and (self._latency_ok or self.polls % 30 == 0)
        if due:
            self._latency_next = now + LATENCY_EVERY_S
            try:
                self.latency.add(time.time(), read_histograms((await self.get("/metrics")).text))
            except httpx.HTTPStatusError as exc:
                self.latency.unreadable(NO_HISTOGRAMS if exc.response.status_code == 404 else describe_error(exc, "/metrics"))
            except (httpx.HTTPError, UnicodeDecodeError) as exc:
                self.latency.unreadable(describe_error(exc, f"{self.url}/metrics"))
            self._latency_ok = self.latency.reason is None
        return self.latency.status(time.time())

    def _records(self) -> list[Any]:
        if self.records_fn is None:
            return []
        try:
            return list(self.records_fn())
        except Exception:  # noqa: BLE001 - the store is someone else's; never crash here
            return []

    def _fresh_log_load(self, records: list[Any]) -> Load | None:
        """The load from decode lines that reached the log since the last poll, stamped
        within ``fresh_s`` of now, when every DP group of the log has one; else None."""
        mark, primed = self._log_seq, self._log_primed
        self._log_primed = True
        if records:
            self._log_seq = max(mark, getattr(records[-1], "seq", 0) or 0)
        if not primed:  # the first poll: everything read so far looks new
            return None
        fresh_s = max(FRESH_LOG_S, 3 * self.interval_s)
        return fresh_decode_load(records, mark, time.time(), fresh_s)

    def _still_idle(self, sample: Sample) -> Load | None:
        """The last load asked for was idle (nothing running or queued) and the server has
        taken no decode step since: still idle, no need to ask (re-asked every IDLE_RECHECK
        polls, and at once when a step is taken)."""
        if self._idle is None:
            return None
        load, steps, since = self._idle
        if since + 1 >= IDLE_RECHECK or decode_steps(sample) != steps:
            self._idle = None
            return None
        self._idle = (load, steps, since + 1)
        return load

    def _remember_idle(self, sample: Sample, fresh: Load | None) -> None:
        load, steps = sample.load, decode_steps(sample)
        if fresh is not None or steps is None or load.batch != 0 or (load.queue or 0) != 0:
            self._idle = None
        elif self._idle is None or self._idle[0] is not load:
            self._idle = (load, steps, 0)

    async def poll_once(self) -> Sample:
        t0 = time.monotonic()
        records = self._records()
        fresh = self._fresh_log_load(records)
        try:
            info = await self.server_info()
            sample = sample_from_server_info(time.time(), info)
            sample.load = fresh or self._still_idle(sample) or await self._load(records) or Load()
            self._remember_idle(sample, fresh)
            sample.latency = await self._latency(sample)
        except Exception as exc:  # noqa: BLE001 - whatever the server did, it is a state, not a crash
            sample = Sample(ts=time.time(), reachable=False, error=describe_error(exc, f"{self.url}/server_info"))
            sample.load = fresh or Load()  # a live log still tells the load while HTTP is down
        sample.poll_s = time.monotonic() - t0
        self._count_quiet(sample)
        sample.next_poll_s = self.next_delay()
        self.polls += 1
        self.last = sample
        if self.on_sample is not None:
            try:
                self.on_sample(sample)
            except Exception:  # noqa: BLE001 - a consumer's bug must not stop the polling
                log.exception("on_sample callback failed")
        return sample

    # -- pacing ------------------------------------------------------------------------
    def _count_quiet(self, sample: Sample) -> None:
        load, steps = sample.load, decode_steps(sample)
        idle = sample.reachable and not sample.error and load.batch == 0 and (load.queue or 0) == 0
        if not idle or (self._quiet_polls and steps != self._quiet_steps):
            self._quiet_polls = 0
        if idle:
            self._quiet_steps = steps if self._quiet_polls == 0 else self._quiet_steps
            self._quiet_polls += 1

    @property
    def quiet(self) -> bool:
        """The server is idle and unchanged: it is polled every ``QUIET_INTERVAL_S``."""
        return self._quiet_polls >= QUIET_AFTER

    def next_delay(self) -> float:
        """Seconds from the start of the last poll to the next one."""
        return max(self.interval_s, QUIET_INTERVAL_S) if self.quiet else self.interval_s

    def wake(self) -> None:
        """Something may have changed (work in the log): a quiet poller polls now and at
        ``interval_s`` again; otherwise nothing happens (the next poll is due anyway)."""
        if self.quiet:
            self._quiet_polls = 0
            self._wake.set()

    def poke(self) -> None:
        self._quiet_polls = 0
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    async def run(self) -> None:
        """Poll, then wait until ``interval_s`` after the last poll STARTED (or at once if
        it took longer) - the next poll is only scheduled once the last one finished."""
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                self._wake.clear()
                await self.poll_once()
                delay = max(0.0, self.next_delay() - (time.monotonic() - started))
                if delay and not self._wake.is_set():
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay)
                    except TimeoutError:
                        pass
        finally:
            await self.aclose()
