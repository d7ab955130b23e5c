"""Bounded time series for the panels and the mode timeline.

``PanelSeries`` keeps the last ``maxlen`` points of batch, gen_throughput, accept_len and
threshold. ``ModeTimeline`` keeps the switches between speculative and target-only seen in
log records (every TP rank logs each switch) and in polled internal state, deduplicated:
each switch is keyed by (DP group, ordinal of the switch since that rank started), so the
n-th switch of a DP group is recorded once whichever rank or source reports it first, and
kept in the order of the ordinals (a poll can see a later switch before the log brings the
one before it).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from server_control.protocol import decision
from server_control.telemetry.log_time import record_epoch
from server_control.telemetry.sample import Sample, intval, num

PANELS = ("batch", "gen_throughput", "accept_len", "threshold", "mode")  # mode: 1 target-only
if TYPE_CHECKING:
    from server_control.logs import Record


DEFAULT_POINTS = 600


class PanelSeries:
    def __init__(self, maxlen: int = DEFAULT_POINTS) -> None:
        self.maxlen = maxlen
        self.series: dict[str, deque[Any]] = {name: deque(maxlen=maxlen) for name in PANELS}
        self.version = 0  # grows with every point added (consumers rebuild only on a change)
        self.added: dict[str, int] = dict.fromkeys(PANELS, 0)  # points ever added, per panel

    def add(self, name: str, t: float, value: float | None) -> None:
        if value is not None:
            self.series[name].append((t, value))
            self.added[name] += 1
            self.version += 1

    def add_sample(self, sample: Sample) -> None:
        if not sample.reachable and sample.load.source != "logs":
            return
        load = sample.load
        self.add("batch", sample.ts, load.batch)
        self.add("gen_throughput", sample.ts, load.gen_throughput)
        self.add("accept_len", sample.ts, load.accept_len)
        self.add("threshold", sample.ts, sample.threshold)
        self.add("mode", sample.ts, None if sample.mode is None else int(sample.mode == decision.TARGET_ONLY))

    def to_json(self) -> dict[str, Any]:
        return {name: [[round(t, 3), v] for t, v in pts] for name, pts in self.series.items()}


def dp_group(rank: str | None) -> int:
    """'DP1 TP3' -> 1; 'TP1', 'TP0 EP0', None -> 0."""
    if rank and rank.startswith("DP"):
        head = rank.split(" ")[0][2:]
        if head.isdigit():
            return int(head)
    return 0


class ModeTimeline:
    def __init__(self, maxlen: int = 1000) -> None:
        self.events: deque[dict[str, Any]] = deque(maxlen=maxlen)
        self._seen: set[tuple[int, int]] = set()
        self._by_key: dict[tuple[int, int], dict[str, Any]] = {}  # this run's events by (DP group, ordinal)
        self._ordinal: dict[str, int] = {}  # per log rank: switches seen since its init line
        self._polled: dict[int, int] = {}  # per DP rank: last polled switch_count
        self.total = 0  # switches of the current run
        self.earlier = 0  # switches of the earlier runs this timeline saw
        self.run = 0  # which server run the events belong to (reset() starts the next)
        self.began: float | None = None  # when the current run began (epoch; None: the first run seen)
        self.version = 0  # grows with every change to an event (consumers rebuild only on a change)

    def reset(self, began: float | None = None) -> None:
        """A new server run (``began``: when, epoch; default now): ordinals and counts start
        again. Earlier events stay for the display, but only ``current()`` events count as
        evidence, and in the counts and the per-mode split, for the new run."""
        self._seen.clear()
        self._by_key.clear()
        self._ordinal.clear()
        self._polled.clear()
        self.earlier += self.total
        self.total = 0
        self.began = time.time() if began is None else began
        self.run += 1
        self.version += 1

    def current(self) -> list[dict[str, Any]]:
        """The switches of the current server run, oldest first."""
        return [e for e in self.events if e.get("run", 0) == self.run]

    @property
    def mode(self) -> str | None:
        return self.events[-1]["mode"] if self.events else None

    def _add(self, key: tuple[int, int], event: dict[str, Any]) -> bool:
        if key in self._seen:
            first = self._by_key.get(key)
            if first is not None and first["source"] == "poll" and event["source"] == "log":
                # the poll saw it first; the log line brings its time, rank and text
                for k in ("ts", "rank", "line", "text", "source"):
                    first[k] = event[k]
                self.version += 1
            return False
        self._seen.add(key)
        self._by_key[key] = event
        event["run"] = self.run
        event["key"] = key
        self._insert(event)
        self.total += 1
        self.version += 1
        return True

    def _insert(self, event: dict[str, Any]) -> None:
        """In the order of the switches: before the DP group's later switches of this run
        already here (a poll can see switch n + 2 before the log brings n + 1)."""
        group, n = event["key"]
        pos = len(self.events)
        for i in range(len(self.events) - 1, -1, -1):
            e = self.events[i]
            if e.get("run") != self.run:
                break
            if e["key"][0] == group:
                if e["key"][1] < n:
                    break
                pos = i
        if pos == len(self.events):
            self.events.append(event)
            return
        if len(self.events) == self.events.maxlen:
            self.events.popleft()
            pos = max(0, pos - 1)
        self.events.insert(pos, event)

    def add_record(self, rec: Record, now: float) -> bool:
        """Feed one log record; True if it added a switch."""
        kind = getattr(rec, "kind", None)
        rank = getattr(rec, "rank", None) or ""
        if kind == "spec_init":
            self._ordinal[rank] = 0
            return False
        if kind != "spec_switch":
            return False
        mode = getattr(rec, "mode", None)
        mode = mode.replace("-", "_") if isinstance(mode, str) else None
        if mode not in decision.MODES:
            return False
        n = self._ordinal.get(rank, 0) + 1
        self._ordinal[rank] = n
        ts = getattr(rec, "ts", None)
        return self._add(
            (dp_group(rank), n),
            {
                "ts": ts if isinstance(ts, str) else None,
                "mode": mode,
                "batch": intval(getattr(rec, "batch", None)),
                "threshold": intval(getattr(rec, "threshold", None)),
                "rank": rank or None,
                "t": record_epoch(ts, now) or now,
                "line": getattr(rec, "line", None),
                "text": getattr(rec, "text", None),
                "source": "log",
            },
        )

    def add_sample(self, sample: Sample) -> bool:
        """Feed one poll; records the latest switch of each DP rank whose count grew."""
        added = False
        for r in sample.ranks:
            dyn = r.dynamic or {}
            count = intval(dyn.get("switch_count"))
            if count is None:
                continue
            before = self._polled.get(r.dp_rank)
            if before is not None and count < before:  # the server restarted
                self.reset()
                before = None
            self._polled[r.dp_rank] = count
            if count == 0 or count == before:
                continue
            last: dict[str, Any] = dyn["last_switch"] if isinstance(dyn.get("last_switch"), dict) else {}
            mode = last.get("to") or r.mode
            if mode not in decision.MODES:
                continue
            added |= self._add(
                (r.dp_rank, count),
                {
                    "ts": None,
                    "mode": mode,
                    "batch": intval(last.get("batch")),
                    "threshold": intval(last.get("threshold")),
                    "rank": f"DP{r.dp_rank}",
                    "t": at if isinstance(at := num(last.get("at")), float) and 0 < at <= sample.ts + 60 else sample.ts,
                    "line": None,
                    "source": "poll",
                    "text": polled_text(r.dp_rank, count, mode, intval(last.get("batch")), intval(last.get("threshold"))),
                },
            )
        return added

    def to_json(self, limit: int = 200) -> list[dict[str, Any]]:
        """The newest switches; ``forced``: made by a forced mode, not by the threshold rule
        (such rows have no batch crossing to show)."""
        return [
            {**{k: e[k] for k in ("ts", "mode", "batch", "threshold", "rank")}, "forced": is_forced(e)}
            for e in list(self.events)[-limit:]
        ]


def polled_text(dp_rank: int, count: int, mode: str, batch: int | None, threshold: int | None) -> str:
    """A polled switch in words (the evidence the verification panel shows)."""
    at = f" at decode batch {batch}" if batch is not None else ""
    n = f" (threshold {threshold})" if threshold is not None else ""
    return f"polled internal_states[{dp_rank}].{decision.STATE_KEY}: switch {count} to {decision.mode_label(mode)}{at}{n}"


def is_forced(event: dict[str, Any]) -> bool:
    """A switch the threshold rule did not make. Log lines say "(forced)"; a polled
    ``last_switch`` does not, so one that the rule could not have made (to target-only at a
    batch <= threshold, back to speculative at a batch > threshold) counts as forced."""
    if "(forced)" in (event.get("text") or ""):
        return True
    batch, n = event.get("batch"), event.get("threshold")
    if event.get("source") != "poll" or batch is None or not n:
        return False
    return bool(batch <= n if event.get("mode") == decision.TARGET_ONLY else batch > n)


def per_mode(sample: Sample | None, timeline: ModeTimeline, panels: PanelSeries) -> dict[str, Any]:
    """Share of time and tok/s per mode.

    From the servers' own counters (dynamic_speculation seconds and tokens, summed over DP
    ranks) when published; otherwise from the gen_throughput series, each point assigned
    to the mode in force at that time by the timeline."""
    secs = {m: 0.0 for m in decision.MODES}
    toks = {m: 0.0 for m in decision.MODES}
    have = False
    for r in sample.ranks if sample else []:
        dyn = r.dynamic or {}
        s, t = dyn.get("seconds"), dyn.get("tokens")
        if isinstance(s, dict) and isinstance(t, dict):
            for m in decision.MODES:
                secs[m] += num(s.get(m)) or 0.0
                toks[m] += num(t.get(m)) or 0.0
            have = True
    if not have:
        return _per_mode_from_series(timeline, panels)
    total = sum(secs.values())
    return {
        m: {"share": round(secs[m] / total, 4) if total else None, "tok_s": round(toks[m] / secs[m], 1) if secs[m] > 0 else None}
        for m in decision.MODES
    }


def _per_mode_from_series(timeline: ModeTimeline, panels: PanelSeries) -> dict[str, Any]:
    """The current run's share: its switches, and the points polled since it began (a run
    starts speculative)."""
    events = sorted(timeline.current(), key=lambda e: e["t"])
    began = timeline.began
    pts = [p for p in panels.series["gen_throughput"] if began is None or p[0] >= began]
    out: dict[str, dict[str, float | None]] = {m: {"share": None, "tok_s": None} for m in decision.MODES}
    if not pts:
        return out
    counts = {m: 0 for m in decision.MODES}
    sums = {m: 0.0 for m in decision.MODES}
    i, mode = 0, decision.SPECULATIVE
    for t, v in pts:
        while i < len(events) and events[i]["t"] <= t:
            mode = events[i]["mode"]
            i += 1
        counts[mode] += 1
        sums[mode] += v
    for m in decision.MODES:
        out[m]["share"] = round(counts[m] / len(pts), 4)
        out[m]["tok_s"] = round(sums[m] / counts[m], 1) if counts[m] else None
    return out
