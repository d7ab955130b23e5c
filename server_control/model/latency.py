"""Request latency the way operators read it: TTFT, inter-token latency, end-to-end and
queue time, p50/p95/p99 over rolling windows (5, 15, 60 s), from the deltas of the server's
own `/metrics` histograms (server_control/telemetry/latency.py computes them). In the
snapshot as ``server.latency``; ``status`` prints one line of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model.json_read import as_int, as_list, as_num, as_obj, as_str

METRICS = ("ttft", "itl", "e2e", "queue")  # the order they are shown in
WORDS = {"ttft": "TTFT", "itl": "ITL", "e2e": "e2e", "queue": "queue"}
MODE_WORDS = {"speculative": "speculative", "target_only": "target-only"}


@dataclass(frozen=True)
class Percentiles:
    """One metric over one window: how many were observed, and p50/p95/p99 in seconds
    (None: nothing observed in the window)."""

    count: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "p50": self.p50, "p95": self.p95, "p99": self.p99}

    @classmethod
    def from_json(cls, raw: object) -> Percentiles:
        r = as_obj(raw)
        num = {k: as_num(r.get(k)) for k in ("p50", "p95", "p99")}
        return cls(as_int(r.get("count")) or 0, *(float(v) if v is not None else None for v in num.values()))


@dataclass(frozen=True)
class LatencyWindow:
    window_s: float  # asked for
    span_s: float  # covered by the snapshots held (shorter just after start)
    metrics: tuple[tuple[str, Percentiles], ...]  # (name in METRICS, its percentiles)
    # (mode, mean inter-token latency in seconds) of the patch's steps in the window
    itl_by_mode: tuple[tuple[str, float], ...] = ()

    def get(self, name: str) -> Percentiles:
        return dict(self.metrics).get(name, Percentiles())

    def to_json(self) -> dict[str, Any]:
        by_mode = {m: round(v, 6) for m, v in self.itl_by_mode}
        return {
            "window_s": self.window_s,
            "span_s": round(self.span_s, 2),
            **{k: self.get(k).to_json() for k in METRICS},
            "itl_mean_by_mode": by_mode,
        }

    @classmethod
    def from_json(cls, raw: object) -> LatencyWindow:
        r = as_obj(raw)
        metrics = tuple((k, Percentiles.from_json(r[k])) for k in METRICS if k in r)
        by_mode = tuple((str(m), float(v)) for m, v in as_obj(r.get("itl_mean_by_mode")).items() if as_num(v) is not None)
        return cls(float(as_num(r.get("window_s")) or 0), float(as_num(r.get("span_s")) or 0), metrics, by_mode)


@dataclass(frozen=True)
class LatencyStatus:
    """``available``: the server publishes the histograms (SGLang: `--enable-metrics`);
    ``reason`` says why not. ``stalled``: decoding slowed below a quarter of its running
    median while requests wait (``stall`` says the numbers)."""

    available: bool = False
    reason: str | None = "not read yet"
    windows: tuple[LatencyWindow, ...] = ()
    stalled: bool = False
    stall: str | None = None

    def window(self, seconds: float) -> LatencyWindow | None:
        return next((w for w in self.windows if w.window_s == seconds), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "reason": self.reason,
            "windows": [w.to_json() for w in self.windows],
            "stalled": self.stalled,
            "stall": self.stall,
        }

    @classmethod
    def from_json(cls, raw: object) -> LatencyStatus:
        r = as_obj(raw)
        if not r:  # an earlier version's snapshot: not read
            return cls()
        return cls(
            r.get("available") is True,
            as_str(r.get("reason")),
            tuple(LatencyWindow.from_json(w) for w in as_list(r.get("windows"))),
            r.get("stalled") is True,
            as_str(r.get("stall")),
        )


def seconds_words(v: float | None) -> str:
    """0.0213 -> "21 ms", 1.4 -> "1.40 s", None -> "-"."""
    if v is None:
        return "-"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def line(status: LatencyStatus, seconds: float = 60.0) -> str:
    """``TTFT p50 120 ms p95 400 ms · ITL p50 21 ms p95 35 ms · ... (60 s, 412 requests)``."""
    if not status.available:
        return f"latency: n/a ({status.reason or 'not reported'})"
    w = status.window(seconds) or (status.windows[-1] if status.windows else None)
    if w is None:
        return "latency: no window yet"
    parts = []
    for name in METRICS:
        p = w.get(name)
        if p.count:
            parts.append(f"{WORDS[name]} p50 {seconds_words(p.p50)} p95 {seconds_words(p.p95)} p99 {seconds_words(p.p99)}")
    if w.itl_by_mode:
        parts.append("ITL mean by mode " + ", ".join(f"{MODE_WORDS.get(m, m)} {seconds_words(v)}" for m, v in w.itl_by_mode))
    done = w.get("e2e").count
    span = f"last {w.span_s:.0f} s" if w.span_s > 0 else "since the server started"
    head = f"latency ({span}, {done} requests done): "
    body = " · ".join(parts) if parts else "nothing observed"
    return head + body + (f"  STALL: {status.stall}" if status.stalled else "")


def _pair(a: float | None, b: float | None) -> str:
    """p50/p95 with the unit once where they share it: "30/49 ms", "3.3/7.0 s", "800 ms/1.2 s"."""
    if a is None or b is None:
        return "-"
    if b < 1:
        return f"{a * 1000:.0f}/{b * 1000:.0f} ms"
    if a >= 1:
        return f"{a:.1f}/{b:.1f} s"
    return f"{a * 1000:.0f} ms/{b:.1f} s"


def compact(status: LatencyStatus, seconds: float = 15.0) -> str:
    """The screen's line: ``latency 15 s: TTFT 30/49 ms · ITL 16/23 ms · e2e 3.3/7.0 s ·
    queue 0/1 ms (p50/p95, 83 done)`` (p99 in `status --json`)."""
    if not status.available:
        return f"latency: n/a ({status.reason or 'not reported'})"
    w = status.window(seconds) or (status.windows[-1] if status.windows else None)
    if w is None:
        return "latency: no window yet"
    parts = [f"{WORDS[n]} {_pair(w.get(n).p50, w.get(n).p95)}" for n in METRICS if w.get(n).count]
    span = f"{w.span_s:.0f} s" if w.span_s > 0 else "since start"
    body = " · ".join(parts) if parts else "nothing observed"
    out = f"latency {span}: {body} (p50/p95, {w.get('e2e').count} done)"
    if w.itl_by_mode:  # last: the part a narrow screen cuts
        out += " · ITL mean " + " / ".join(f"{MODE_WORDS.get(m, m)} {seconds_words(v)}" for m, v in w.itl_by_mode)
    return out + (f"  STALL: {status.stall}" if status.stalled else "")
