"""The parts of a session's snapshot built from its telemetry: the panels' series and the
switch timeline (each rebuilt only when its source changed: the panels' and the timeline's
``version``), the speculation status of the last answered poll and its switch rate, the
server status, and when a change made elsewhere is no longer news."""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import islice
from types import MappingProxyType
from typing import Any

from server_control.control.guard import shown
from server_control.model.latency import LatencyStatus
from server_control.model.snapshot import MODES, ModeShare, Series, ServerStatus, SettingChange, SpecStatus, Switch, Timeline
from server_control.model.switch_health import SwitchHealth
from server_control.model.switch_rate import SwitchRate
from server_control.model.vocabulary import ChangeState
from server_control.telemetry.flapping import switch_rate
from server_control.telemetry.sample import RankState, Sample
from server_control.telemetry.series import PANELS, ModeTimeline, PanelSeries, is_forced, per_mode

SWITCHES_SHOWN = 200
ELSEWHERE_SHOWN_S = 60.0  # how long "N changed elsewhere: ..." or "auto-tuned ..." stays on the status line


class SnapshotParts:
    def __init__(self, panels: PanelSeries, timeline: ModeTimeline) -> None:
        self.panels = panels
        self.timeline = timeline
        self._series: tuple[int, Series] = (-1, Series())  # (panels.version, built)
        self._built: dict[str, tuple[int, tuple[Any, ...]]] = {}  # panel -> (points added then, its tuple)
        self._switches: tuple[int, tuple[Switch, ...]] = (-1, ())  # (timeline.version, built)

    def series(self) -> Series:
        version, built = self._series
        if version != self.panels.version:
            built = Series(*(self._panel(name) for name in PANELS))
            self._series = (self.panels.version, built)
        return built

    def _panel(self, name: str) -> tuple[Any, ...]:
        """The panel's points as the snapshot's tuple: only the points added since the last
        build are rounded and appended (a snapshot a second with 600 points a panel)."""
        points, added = self.panels.series[name], self.panels.added[name]
        then, old = self._built.get(name, (0, ()))
        new = added - then
        if new == 0:
            return old
        if new >= len(points) or not old:
            out = tuple((round(t, 3), v) for t, v in points)
        else:
            fresh = tuple((round(t, 3), v) for t, v in islice(points, len(points) - new, None))
            out = (old + fresh)[-len(points) :]
        self._built[name] = (added, out)
        return out

    def timeline_of(self, s: Sample | None) -> Timeline:
        """The last ``SWITCHES_SHOWN`` switches and the share of each mode (``s``: the last poll)."""
        version, switches = self._switches
        if version != self.timeline.version:
            switches = tuple(
                Switch(e["ts"], e["mode"], e["batch"], e["threshold"], e["rank"], is_forced(e))
                for e in list(self.timeline.events)[-SWITCHES_SHOWN:]
            )
            self._switches = (self.timeline.version, switches)
        shares = per_mode(s, self.timeline, self.panels)
        return Timeline(switches, MappingProxyType({m: ModeShare(**shares[m]) for m in MODES}), self.timeline.earlier)

    def spec(self, s: Sample | None, rate: SwitchRate) -> SpecStatus:
        """Mode, N and the switch counters as the poll ``s`` shows them (the timeline's
        where it has none); ``rate``: the session's switch rate."""
        ranks = s.ranks if s else []
        dyn = next((r.dynamic for r in ranks if r.dynamic), None) or {}
        r0 = ranks[0] if ranks else None
        # the server's counters, unless the log has already shown switches the last poll
        # had not counted yet (the timeline holds both): never fewer than the switches listed
        counted = sum(int((r.dynamic or {}).get("switch_count") or 0) for r in ranks) if dyn else 0
        count = max(counted, self.timeline.total)
        raw = {
            "mode": (s.mode if s else None) or self.timeline.mode,
            "threshold": s.threshold if s else None,
            "low_mark": dyn.get("low_mark"),
            "hysteresis": r0.hysteresis if r0 else None,
            "min_dwell_steps": r0.min_dwell_steps if r0 else None,
            "force": r0.force if r0 else None,
            "switch_count": count,
            "cold_draft_above": dyn.get("cold_draft_above"),
            "cold_steps": _summed(ranks, "cold_steps") if dyn else None,
            "steps": dyn.get("steps"),
            "seconds": dyn.get("seconds"),
            "tokens": dyn.get("tokens"),
            "supports_runtime_threshold": s.supports_runtime_threshold if s else None,
        }
        health = SwitchHealth.from_states([r.dynamic for r in ranks])
        return replace(SpecStatus.from_json(raw), switch_rate=rate, health=health)  # counters read tolerantly


def _summed(ranks: list[RankState], key: str) -> int | None:
    """``key``'s count summed over the DP ranks that report it (None: none does, a patch
    that predates it)."""
    said = [(r.dynamic or {}).get(key) for r in ranks]
    counts: list[int] = [c for c in said if isinstance(c, int) and not isinstance(c, bool)]
    return sum(counts) if counts else None


def server_status(s: Sample | None, foreign: bool) -> ServerStatus:
    """The snapshot's ``server`` from the last poll ``s`` (``foreign``: what answers is not this run's server)."""
    return ServerStatus(
        reachable=bool(s and s.reachable),
        error=s.error if s else "not polled yet",
        model=s.model if s else None,
        tp_size=s.tp_size if s else None,
        dp_size=s.dp_size if s else None,
        version=s.version if s else None,
        foreign=foreign,
        latency=s.latency if s and s.latency is not None else LatencyStatus(),
    )


def stale_elsewhere(tc: SettingChange | None, g: Sample | None, elsewhere_at: float) -> bool:
    """``tc`` is a change made elsewhere or by the server's own tuner (told at monotonic
    ``elsewhere_at``) that is old news (ELSEWHERE_SHOWN_S) or no longer what the last
    answered poll ``g`` shows."""
    return (
        tc is not None
        and tc.state in (ChangeState.ELSEWHERE, ChangeState.AUTO_TUNED)
        and (
            time.monotonic() - elsewhere_at > ELSEWHERE_SHOWN_S
            or (g is not None and tc.key in shown(g) and not _same_value(shown(g)[tc.key], tc.requested))
        )
    )


def _same_value(a: object, b: object) -> bool:
    return a == b or str(a) == str(b)


def rate_of(
    g: Sample | None, timeline: ModeTimeline, known: tuple[float | None, ...], uptime_s: float | None, changed_at: float | None
) -> SwitchRate:
    """The switch rate of the timeline's rule-made switches (telemetry/flapping.py), measured
    from the earliest of the times ``known`` and the run's start (``uptime_s`` ago); ``g``:
    the last answered poll (N, hysteresis, dwell); ``changed_at``: the last change of them."""
    r0 = g.ranks[0] if g and g.ranks else None
    now = time.time()
    since = min(t for t in (*known, now - uptime_s if uptime_s is not None else None) if t is not None)
    return switch_rate(
        [e["t"] for e in timeline.current() if not is_forced(e)],
        now,
        since,
        threshold=g.threshold if g else None,
        hysteresis=r0.hysteresis if r0 else None,
        dwell=r0.min_dwell_steps if r0 else None,
        changed_at=changed_at,
    )
