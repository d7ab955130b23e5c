"""The fleet screen's aggregate line and per-row trend: pure functions over ``MemberRow``.

    fleet 412.5 tok/s | SPEC 3  TARGET 1 | live 4/4 | restarts 1 | ITL p95 imbalance: replica3 58ms vs 21ms (...)
    gateway 4/4 workers healthy · 4.2 req/s · 0 err/min · p50 41 ms (60 s)

The gateway's traffic is smg's own counters (server_control/fleet/gateway_metrics.py): requests a
second, client errors a minute and the router's p50 latency over the last minute, or
"metrics unavailable (reason)".

The imbalance flag: a member whose p95 inter-token latency over the last 15 s (its /metrics
histograms, the table's ITL95 column) is at least twice the median of the others' (three
members with histograms at least).

The total counts only members whose numbers are live (``rows.stale`` is False); members per
mode likewise; "down" lists the members that do not answer or are not serving. ``Trends``
keeps each member's last tok/s readings (one per refresh) for a sparkline column.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from rich.text import Text

from console.fleet.rows import MODE_WORD, ms, stale
from server_control.fleet.member import MemberRow

BARS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
TREND_POINTS = 10


def aggregate_line(rows: Iterable[MemberRow], gateway=None) -> Text:
    rows = list(rows)
    live = [r for r in rows if not stale(r)]
    total = sum(r.tok_s for r in live if r.tok_s is not None)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"fleet {total:.1f} tok/s", "bold")
    modes: dict[str, int] = {}
    for r in live:
        word = MODE_WORD.get(r.mode, r.mode or "-")
        modes[word] = modes.get(word, 0) + 1
    if modes:
        t.append(" | " + "  ".join(f"{w} {n}" for w, n in sorted(modes.items())))
    t.append(f" | live {len(live)}/{len(rows)}", "green" if len(live) == len(rows) else "bold red")
    down = [r.name for r in rows if stale(r)]
    if down:
        t.append(f" (down: {', '.join(down)})", "bold red")
    restarts = sum(r.restarts for r in rows)
    if restarts:
        t.append(f" | restarts {restarts}", "yellow")
    slow = imbalance(live)
    if slow:
        t.append(f" | {slow}", "bold yellow")
    if gateway is not None:  # its own line: 80 columns hold the fleet's part or the gateway's, not both
        healthy = gateway.reachable and gateway.healthy_workers == len(gateway.workers) > 0
        t.append("\n")
        t.append(
            f"gateway {gateway.healthy_workers}/{len(gateway.workers)} workers healthy"
            if gateway.reachable
            else "gateway not readable",
            "green" if healthy else "yellow",
        )
        traffic = gateway.traffic
        if gateway.reachable and traffic is not None:
            style = "dim" if traffic.error else "bold red" if traffic.err_min else ""
            t.append(" \u00b7 " + traffic.words(), style)
    return t


IMBALANCE = 2.0  # a member's p95 ITL this many times the others' median is flagged


def imbalance(live: list[MemberRow]) -> str:
    """``ITL p95 imbalance: replica3 58ms vs 21ms (the others' median)``, or "" (fewer than
    three members with the histograms, or none that slow)."""
    have = [(r.itl_p95, r.name) for r in live if r.itl_p95 is not None and r.itl_p95 > 0]
    if len(have) < 3:
        return ""
    worst, name = max(have)
    others = sorted(v for v, n in have if n != name)
    median = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
    if worst < IMBALANCE * median:
        return ""
    return f"ITL p95 imbalance: {name} {ms(worst)} vs {ms(median)} (the others' median)"


def sparkline(values: Iterable[float | None], width: int = TREND_POINTS) -> str:
    """One bar per reading, scaled to the largest; a reading that is not known is a space."""
    vals = list(values)[-width:]
    top = max((v for v in vals if v is not None), default=0.0)
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        else:
            out.append(BARS[min(len(BARS) - 1, int(v / top * (len(BARS) - 1) + 0.5))] if top > 0 else BARS[0])
    return "".join(out).rjust(width)


class Trends:
    """Each member's last TREND_POINTS tok/s readings (None while its numbers are not live)."""

    def __init__(self, points: int = TREND_POINTS) -> None:
        self.points = points
        self.values: dict[str, deque[float | None]] = {}

    def add(self, rows: Iterable[MemberRow]) -> None:
        for r in rows:
            self.values.setdefault(r.name, deque(maxlen=self.points)).append(None if stale(r) else r.tok_s)

    def line(self, name: str) -> str:
        return sparkline(self.values.get(name, ()), self.points)
