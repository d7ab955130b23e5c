"""The gateway's own traffic, from smg's Prometheus listener (``GET /metrics``).

    reader = TrafficReader(client)                      # one per Gateway
    traffic = await reader.read(run_record)             # GatewayRates (or why not, in .error)
    sample = parse_metrics(text, at=time.time())       # GatewaySample: cumulative counters
    window = TrafficWindow(started_at=run_start_epoch)  # counters are 0 when smg starts
    traffic = window.add(sample)                        # GatewayRates over the last <= 60 s

What smg 1.13 counts (an HTTP router with ``--disable-tokenizer-autoload``; it tokenizes
nothing, so it counts requests, not tokens):

- requests: ``smg_router_requests_total`` (every label set: model, endpoint, streaming);
- errors: ``smg_http_responses_total`` with a status code >= 400 on a client path (the
  gateway's own admin paths, ``/health``, ``/workers``... that the fleet itself calls, are not
  counted: a 409 to our own ``POST /workers`` is not a client's failed request);
- latency: the ``smg_router_request_duration_seconds`` histogram (the router's time per
  request, first byte to last), p50 interpolated inside its bucket as Prometheus'
  ``histogram_quantile`` does.

Rates are differences between two samples. The first sample of a run is compared with the
run's start (every counter is 0 then), so a one-shot ``fleet status`` gives the rate since smg
started; later samples use the oldest sample within ``WINDOW_S``. A counter that went down
(smg restarted under the same record) starts the window again.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from server_control.net.http import bounded_request
from server_control.net.lean_httpx import httpx

if TYPE_CHECKING:
    from server_control.state.runs import RunRecord

WINDOW_S = 60.0
METRICS_MAX_BYTES = 2 << 20  # smg's answer is ~30 KB with one worker; it grows per worker
METRICS_DEADLINE_S = 2.0
METRICS_EVERY_S = 5.0  # the fleet's gateway watch reads /metrics at most this often (rates over WINDOW_S)
REQUESTS = "smg_router_requests_total"
RESPONSES = "smg_http_responses_total"
DURATION = "smg_router_request_duration_seconds_bucket"
ADMIN_PATHS = ("/health", "/workers", "/liveness", "/readiness", "/metrics", "/flush_cache", "/get_loads", "/v1/loads")
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class GatewaySample:
    """smg's cumulative counters at one moment (``at``: epoch seconds)."""

    at: float
    requests: float = 0.0
    errors: float = 0.0
    buckets: tuple[tuple[float, float], ...] = ()  # (upper bound s, cumulative count), sorted


@dataclass(frozen=True)
class GatewayRates:
    """The gateway's traffic over ``window_s``; ``error``: why there is none to show."""

    req_s: float | None = None
    err_min: float | None = None
    p50_ms: float | None = None  # None: no request finished in the window
    window_s: float = 0.0
    requests_total: float = 0.0
    errors_total: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def words(self) -> str:
        """``4.2 req/s · 0 err/min · p50 41 ms (60 s)``, or ``metrics unavailable (why)``."""
        if self.error is not None:
            return f"metrics unavailable ({self.error})"
        p50 = f"p50 {self.p50_ms:.0f} ms" if self.p50_ms is not None else "p50 -"
        return f"{self.req_s or 0:.1f} req/s \u00b7 {self.err_min or 0:.0f} err/min \u00b7 {p50} ({_span(self.window_s)})"


def _span(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.0f} h"


def _is_client_error(labels: dict[str, str]) -> bool:
    code = labels.get("status_code", "")
    path = labels.get("path", "")
    return code.isdigit() and int(code) >= 400 and not path.startswith(ADMIN_PATHS)


def parse_metrics(text: str, at: float) -> GatewaySample:
    """Prometheus text -> the counters above (label sets summed). ValueError when the text
    has none of smg's router counters (not smg's listener, or not Prometheus text)."""
    requests = errors = 0.0
    buckets: dict[float, float] = {}
    seen = False
    for line in text.splitlines():
        if not line.startswith("smg_"):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        name, labels_text, raw = m.groups()
        if name not in (REQUESTS, RESPONSES, DURATION):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        seen = True
        labels = dict(_LABEL.findall(labels_text or ""))
        if name == REQUESTS:
            requests += value
        elif name == RESPONSES:
            errors += value if _is_client_error(labels) else 0.0
        else:
            le = labels.get("le", "")
            bound = math.inf if le == "+Inf" else _float(le)
            if bound is not None:
                buckets[bound] = buckets.get(bound, 0.0) + value
    if not seen and "smg_" not in text:
        raise ValueError(f"no smg counters in the answer ({text[:60]!r})")
    return GatewaySample(at, requests, errors, tuple(sorted(buckets.items())))


def _float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def quantile(q: float, buckets: tuple[tuple[float, float], ...]) -> float | None:
    """histogram_quantile over cumulative (bound, count) buckets; None with no observation."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower  # in the open bucket: the largest finite bound, as Prometheus does
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def difference(new: GatewaySample, old: GatewaySample) -> GatewayRates:
    span = max(new.at - old.at, 1e-6)
    old_b = dict(old.buckets)
    delta = tuple((b, c - old_b.get(b, 0.0)) for b, c in new.buckets)
    p50 = quantile(0.5, delta)
    return GatewayRates(
        req_s=(new.requests - old.requests) / span,
        err_min=(new.errors - old.errors) / span * 60.0,
        p50_ms=p50 * 1000.0 if p50 is not None else None,
        window_s=span,
        requests_total=new.requests,
        errors_total=new.errors,
    )


@dataclass
class TrafficWindow:
    """The samples of one gateway run within ``window_s``; ``started_at``: the run's start
    (epoch s), the zero point of its counters (None: unknown, the first sample is the base)."""

    started_at: float | None = None
    window_s: float = WINDOW_S
    samples: deque[GatewaySample] = field(default_factory=deque)

    def reset(self, started_at: float | None) -> None:
        self.started_at = started_at
        self.samples.clear()

    def add(self, sample: GatewaySample) -> GatewayRates:
        last = self.samples[-1] if self.samples else None
        if last is not None and (sample.requests < last.requests or sample.errors < last.errors):
            self.reset(None)  # smg restarted: its counters began again
        self.samples.append(sample)
        while len(self.samples) > 2 and sample.at - self.samples[1].at >= self.window_s:
            self.samples.popleft()
        base = self.samples[0]
        if base is sample:
            if self.started_at is None or self.started_at >= sample.at:
                return GatewayRates(error="first sample, no rate yet", requests_total=sample.requests)
            base = GatewaySample(self.started_at)
        return difference(sample, base)


def prometheus_url(record: RunRecord) -> str | None:
    """smg's metrics URL from the run's own command line (``--prometheus-host/-port``)."""
    argv = list(record.argv)
    try:
        port = argv[argv.index("--prometheus-port") + 1]
    except (ValueError, IndexError):
        return None
    host = argv[argv.index("--prometheus-host") + 1] if "--prometheus-host" in argv[:-1] else "127.0.0.1"
    if not port.isdigit():
        return None
    return f"http://{host}:{port}/metrics"


def _started(record: RunRecord) -> float | None:
    try:
        return datetime.fromisoformat(record.started_at).timestamp()
    except ValueError:
        return None


class TrafficReader:
    """Reads smg's ``/metrics`` (capped at METRICS_MAX_BYTES, within METRICS_DEADLINE_S) for the
    gateway run in ``record`` and keeps that run's TrafficWindow. The rates are over a minute:
    a caller that asks every poll (the fleet's gateway watch) passes ``max_age_s`` and gets the
    last rates while they are younger than that, so that ``/metrics`` (tens of KB, more per
    worker, parsed line by line) is read once per ``max_age_s``; a new gateway run is read at
    once."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.window = TrafficWindow()
        self._run: tuple[int, float] | None = None
        self._last: tuple[float, GatewayRates] | None = None  # (monotonic time read, its rates)
        self.reads = 0  # /metrics requests sent

    async def read(self, record: RunRecord | None, max_age_s: float = 0.0) -> GatewayRates:
        if record is None:
            return GatewayRates(error="no gateway run record")
        url = prometheus_url(record)
        if url is None:
            return GatewayRates(error="the gateway's command line names no --prometheus-port")
        if self._run != (record.pid, record.create_time):
            self._run = (record.pid, record.create_time)
            self.window.reset(_started(record))
            self._last = None
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < max_age_s:
            return self._last[1]
        rates = await self._read(url)
        self._last = (now, rates)
        return rates

    async def _read(self, url: str) -> GatewayRates:
        self.reads += 1
        try:
            resp = await bounded_request(self.client, "GET", url, max_bytes=METRICS_MAX_BYTES, deadline_s=METRICS_DEADLINE_S)
            resp.raise_for_status()
            sample = parse_metrics(resp.content.decode("utf-8", "replace"), time.time())
        except httpx.HTTPError as exc:
            return GatewayRates(error=f"{url}: {type(exc).__name__}: {exc}"[:160])
        except ValueError as exc:
            return GatewayRates(error=f"{url}: {exc}"[:160])
        return self.window.add(sample)
