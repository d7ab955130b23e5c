"""Latency windows from the server's `/metrics` histograms (issue 35 item 4), as sgtop and
vllm-htop read them: TTFT, inter-token latency, end-to-end and queue time, p50/p95/p99 over
the last 5, 15 and 60 s, from the deltas of SGLang's cumulative histograms
(``histogram_quantile``'s linear interpolation inside a bucket), summed over label sets
(streaming and not, ranks).

Only the four histograms' lines are read (a prefix test per line, not the whole exposition
through a parser: /metrics of a real server is hundreds of lines); a counter that went down
(the server restarted) starts the windows again. A stall: decode throughput below a quarter
of its median over the last 60 s while requests wait in the queue.

The ITL split by mode (speculative and target-only steps) comes from the patch's cost
curves in ``dynamic_speculation`` (SGLang's histogram does not say which mode a token came
from): per mode, the decode seconds each request waited (a step's time times its batch)
over the tokens committed, i.e. the mean inter-token latency of that mode's steps, over
the same windows. A mean, not a percentile: the counters are sums.
"""

from __future__ import annotations

import collections
import math
import re
import statistics
from collections.abc import Mapping

from server_control.model.latency import LatencyStatus, LatencyWindow, Percentiles
from server_control.protocol.cost_curves import SNAPSHOT_KEY, CurvesError, parse

ModeTotals = dict[str, tuple[float, float]]  # mode -> (request-seconds waited, tokens committed)


def mode_totals(dynamic: object) -> ModeTotals | None:
    """Per mode, cumulative request-seconds (a step's time times its batch) and tokens, from
    a rank's ``dynamic_speculation.cost_curves``; None when it publishes none (or bad ones)."""
    raw = dynamic.get(SNAPSHOT_KEY) if isinstance(dynamic, dict) else None
    if raw is None:
        return None
    try:
        curves = parse(raw)
    except CurvesError:
        return None
    out: ModeTotals = {}
    for b in curves.buckets:
        if b.steps <= 0 or b.verified <= 0:
            continue
        waited, tokens = out.get(b.mode, (0.0, 0.0))
        # tokens of the timed steps only: a bucket's untimed steps committed tokens too
        out[b.mode] = (waited + b.seconds * b.mean_batch, tokens + b.tokens * min(1.0, b.steps / b.verified))
    return out


HISTOGRAMS = {
    "ttft": "sglang:time_to_first_token_seconds",
    "itl": "sglang:inter_token_latency_seconds",
    "e2e": "sglang:e2e_request_latency_seconds",
    "queue": "sglang:queue_time_seconds",
}
WINDOWS_S = (5.0, 15.0, 60.0)
KEEP_S = 75.0  # snapshots older than the longest window (and a margin) are dropped
STALL_SHARE = 0.25
STALL_MIN_SAMPLES = 10
NO_HISTOGRAMS = "no latency histograms: the server publishes them on /metrics with --enable-metrics"
_LE = re.compile(r'le="([^"]+)"')

Buckets = tuple[tuple[float, float], ...]  # (upper bound, cumulative count), sorted, +Inf last


def read_histograms(text: str) -> dict[str, Buckets]:
    """The four histograms' cumulative buckets, summed over every label set."""
    prefixes = {f"{name}_bucket": key for key, name in HISTOGRAMS.items()}
    sums: dict[str, dict[float, float]] = {}
    for raw in text.splitlines():
        if not raw.startswith("sglang:"):
            continue
        head = raw.split("{", 1)[0]
        key = prefixes.get(head)
        if key is None:
            continue
        m = _LE.search(raw)
        try:
            bound = float(m.group(1)) if m else None
            value = float(raw.rsplit(" ", 1)[1])
        except (ValueError, IndexError):
            continue  # an unreadable line: skipped, the others still count
        if bound is None or math.isnan(value):
            continue
        per = sums.setdefault(key, {})
        per[bound] = per.get(bound, 0.0) + value
    return {k: tuple(sorted(v.items())) for k, v in sums.items()}


def quantile(q: float, buckets: Buckets) -> float | None:
    """Prometheus' ``histogram_quantile``: linear inside the bucket that holds rank q*count;
    the last finite bound when it falls in +Inf. None: nothing observed."""
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = (bound if not math.isinf(bound) else prev_bound), count
    return prev_bound


def _delta(new: Buckets, old: Buckets | None) -> Buckets | None:
    """``new - old`` per bound; None when a count went down (a restart) or the bounds differ."""
    if old is None:
        return new
    before = dict(old)
    out = []
    for bound, count in new:
        d = count - before.get(bound, 0.0)
        if d < 0:
            return None
        out.append((bound, d))
    return tuple(out)


class LatencyWindows:
    """``add(t, histograms)`` at each read; ``status(t)`` the windows at ``t``."""

    def __init__(self, windows_s: tuple[float, ...] = WINDOWS_S) -> None:
        self.windows_s = windows_s
        self._snaps: collections.deque[tuple[float, dict[str, Buckets]]] = collections.deque()
        self._rates: collections.deque[tuple[float, float]] = collections.deque()  # (t, decode tok/s)
        self._modes: collections.deque[tuple[float, ModeTotals]] = collections.deque()
        self.reason: str | None = "not read yet"
        self.stall: str | None = None

    def add(self, t: float, histograms: Mapping[str, Buckets]) -> None:
        if not histograms:
            self.reason = NO_HISTOGRAMS
            return
        self.reason = None
        last = self._snaps[-1][1] if self._snaps else None
        if last is not None and any(_delta(b, last.get(k)) is None for k, b in histograms.items()):
            self._snaps.clear()  # the server restarted: its counters began again
        self._snaps.append((t, dict(histograms)))
        while len(self._snaps) > 2 and self._snaps[1][0] < t - KEEP_S:
            self._snaps.popleft()

    def add_modes(self, t: float, totals: ModeTotals | None) -> None:
        """The patch's per-mode totals at ``t`` (each poll); a total that went down (a
        restart) starts them again."""
        if totals is None:
            return
        last = self._modes[-1][1] if self._modes else None
        if last is not None and any(v[0] < last.get(m, (0.0, 0.0))[0] - 1e-9 for m, v in totals.items()):
            self._modes.clear()
        self._modes.append((t, totals))
        while len(self._modes) > 2 and self._modes[1][0] < t - KEEP_S:
            self._modes.popleft()

    def itl_by_mode(self, window_s: float) -> tuple[tuple[str, float], ...]:
        """(mode, mean inter-token latency in seconds) over the last ``window_s``, the modes
        that committed tokens in it; with one reading yet (a headless `status`), since the
        server started, as the histograms' windows say then."""
        if not self._modes:
            return ()
        t_last, last = self._modes[-1]
        base: ModeTotals = {}
        if len(self._modes) > 1:
            t0, base = next(((ts, m) for ts, m in self._modes if ts >= t_last - window_s), self._modes[0])
            if t0 == t_last:
                base = self._modes[-2][1]
        out = []
        for mode in sorted(last):
            w1, k1 = last[mode]
            w0, k0 = base.get(mode, (0.0, 0.0))
            if k1 - k0 > 0:
                out.append((mode, (w1 - w0) / (k1 - k0)))
        return tuple(out)

    def unreadable(self, why: str) -> None:
        self.reason = why

    def watch_decode(self, t: float, tok_s: float | None, waiting: int | None) -> None:
        """The stall flag: this poll's decode throughput against its median of the last
        60 s (busy polls only), while requests wait."""
        self.stall = None
        if tok_s is None:
            return
        while self._rates and self._rates[0][0] < t - 60.0:
            self._rates.popleft()
        busy = [r for _, r in self._rates if r > 0]
        if len(busy) >= STALL_MIN_SAMPLES and (waiting or 0) > 0:
            median = statistics.median(busy)
            if tok_s < STALL_SHARE * median:
                self.stall = f"decode {tok_s:.0f} tok/s, under a quarter of its 60 s median {median:.0f}, with {waiting} waiting"
        self._rates.append((t, tok_s))

    def status(self, t: float) -> LatencyStatus:
        if self.reason is not None or not self._snaps:
            return LatencyStatus(False, self.reason or "not read yet", stalled=self.stall is not None, stall=self.stall)
        t_last, last = self._snaps[-1]
        windows = []
        for w in self.windows_s:
            t0, base = next(((ts, h) for ts, h in self._snaps if ts >= t_last - w), self._snaps[0])
            if t0 == t_last and len(self._snaps) > 1:  # one snapshot inside: take the one before it
                i = len(self._snaps) - 2
                t0, base = self._snaps[i]
            first = t0 == t_last  # only one snapshot yet: everything since the server started
            metrics = []
            for key in HISTOGRAMS:
                d = _delta(last[key], None if first else base.get(key)) if key in last else None
                if d is None:  # not published: nothing observed (every window names all four)
                    metrics.append((key, Percentiles()))
                    continue
                count = int(d[-1][1]) if d else 0
                metrics.append((key, Percentiles(count, quantile(0.5, d), quantile(0.95, d), quantile(0.99, d))))
            windows.append(LatencyWindow(w, 0.0 if first else t_last - t0, tuple(metrics), self.itl_by_mode(w)))
        return LatencyStatus(True, None, tuple(windows), self.stall is not None, self.stall)
