"""The session snapshot: what one server looks like right now, as frozen dataclasses.

``Session.snapshot()`` returns a ``SessionSnapshot``; the screen, the headless commands and
the fleet read its typed parts. JSON exists only at the edge: ``to_json()`` gives exactly
the schema `specconsole status --json` prints (docs/architecture.md), and ``from_json()``
reads it back, tolerantly (a value of the wrong type becomes None or empty, never an
exception), e.g. from a remote member's `status --json`.

Cheap to consume in numbers: every part is immutable, so a consumer keeps the last part it
drew and redraws only when the new one differs (``!=`` on identical objects is a pointer
check); the session rebuilds the long parts (series, switches) only when they changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from server_control.model.gpu_status import GpuStatus
from server_control.model.json_read import as_bool, as_counts, as_int, as_list, as_num, as_obj, as_str
from server_control.model.latency import LatencyStatus
from server_control.model.load import Load
from server_control.model.run_status import RunStatus
from server_control.model.switch_health import SwitchHealth
from server_control.model.switch_rate import SwitchRate
from server_control.model.verification import Verification
from server_control.model.vocabulary import ChangeState, change_state
from server_control.protocol.decision import THRESHOLD_COUNTS

Point = tuple[float, float]
MODES = ("speculative", "target_only")
SERIES = ("batch", "gen_throughput", "accept_len", "threshold", "mode")
_EMPTY: Mapping[str, float] = MappingProxyType({})

__all__ = [
    "EMPTY_SNAPSHOT",
    "LogStatus",
    "ModeShare",
    "Series",
    "ServerStatus",
    "SessionSnapshot",
    "SettingChange",
    "SpecStatus",
    "Switch",
    "Timeline",
]


# ---- the parts -------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerStatus:
    reachable: bool = False
    error: str | None = "not polled yet"
    model: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    version: str | None = None
    foreign: bool = False  # something answers at the URL, but it is not this run's server (``error`` says who)
    latency: LatencyStatus = LatencyStatus()  # TTFT/ITL/e2e/queue percentiles from /metrics (model/latency.py)

    def to_json(self) -> dict[str, Any]:
        return {
            "reachable": self.reachable,
            "error": self.error,
            "model": self.model,
            "tp_size": self.tp_size,
            "dp_size": self.dp_size,
            "version": self.version,
            "foreign": self.foreign,
            "latency": self.latency.to_json(),
        }

    @classmethod
    def from_json(cls, raw: object) -> ServerStatus:
        r = as_obj(raw)
        return cls(
            reachable=r.get("reachable") is True,
            error=as_str(r.get("error")),
            model=as_str(r.get("model")),
            tp_size=as_int(r.get("tp_size")),
            dp_size=as_int(r.get("dp_size")),
            version=as_str(r.get("version")),
            foreign=r.get("foreign") is True,
            latency=LatencyStatus.from_json(r.get("latency")),
        )


@dataclass(frozen=True)
class SpecStatus:
    """Dynamic speculation as the server reports it (``mode`` falls back to the last
    logged switch); steps/seconds/tokens are per mode, summed over DP ranks."""

    mode: str | None = None
    threshold: int | None = None
    low_mark: int | None = None
    hysteresis: int | None = None
    min_dwell_steps: int | None = None
    force: str | None = None
    switch_count: int = 0
    cold_draft_above: int | None = None  # the cold-draft mark M (0: the draft kept warm); None: not said
    cold_steps: int | None = None  # target-only steps that skipped the draft's extend, summed over DP ranks
    steps: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    seconds: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    tokens: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    supports_runtime_threshold: bool | None = None
    switch_rate: SwitchRate = SwitchRate()  # rule-made switches lately; flapping (telemetry/flapping.py)
    health: SwitchHealth = SwitchHealth()  # active / reason / TP rank disagreement / real steps

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "threshold": self.threshold,
            "threshold_counts": THRESHOLD_COUNTS,  # what the batch and N count (protocol/decision.py)
            "low_mark": self.low_mark,
            "hysteresis": self.hysteresis,
            "min_dwell_steps": self.min_dwell_steps,
            "force": self.force,
            "switch_count": self.switch_count,
            "cold_draft_above": self.cold_draft_above,
            "cold_steps": self.cold_steps,
            "steps": dict(self.steps),
            "seconds": dict(self.seconds),
            "tokens": dict(self.tokens),
            "supports_runtime_threshold": self.supports_runtime_threshold,
            "switch_rate": self.switch_rate.to_json(),
            "health": self.health.to_json(),
        }

    @classmethod
    def from_json(cls, raw: object) -> SpecStatus:
        r = as_obj(raw)
        mode = r.get("mode")
        return cls(
            mode=mode if mode in MODES else None,
            threshold=as_int(r.get("threshold")),
            low_mark=as_int(r.get("low_mark")),
            hysteresis=as_int(r.get("hysteresis")),
            min_dwell_steps=as_int(r.get("min_dwell_steps")),
            force=as_str(r.get("force")),
            switch_count=as_int(r.get("switch_count")) or 0,
            cold_draft_above=as_int(r.get("cold_draft_above")),
            cold_steps=as_int(r.get("cold_steps")),
            steps=as_counts(r.get("steps")),
            seconds=as_counts(r.get("seconds")),
            tokens=as_counts(r.get("tokens")),
            supports_runtime_threshold=as_bool(r.get("supports_runtime_threshold")),
            switch_rate=SwitchRate.from_json(r.get("switch_rate")),
            health=SwitchHealth.from_json(r.get("health")),
        )


@dataclass(frozen=True)
class SettingChange:
    """A runtime setting change (threshold, force mode, hysteresis, dwell) and how it went:
    pending | applied | refused | unsupported | error (server_control/control/settings.py). ``key``:
    which setting (its server-argument name; None when not said)."""

    requested: object
    state: ChangeState
    detail: str = ""
    ranks: tuple[bool, ...] = ()
    key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "state": self.state,
            "detail": self.detail,
            "ranks": list(self.ranks),
            "key": self.key,
        }

    @classmethod
    def from_json(cls, raw: object) -> SettingChange | None:
        state = change_state(raw.get("state")) if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or state is None:
            return None
        req = raw.get("requested")
        return cls(
            requested=req if isinstance(req, (int, str)) else None,
            state=state,
            detail=as_str(raw.get("detail")) or "",
            ranks=tuple(x for x in as_list(raw.get("ranks")) if isinstance(x, bool)),
            key=as_str(raw.get("key")),
        )


def _points(raw: object) -> tuple[Point, ...]:
    out = []
    for p in as_list(raw):
        if isinstance(p, (list, tuple)) and len(p) == 2 and as_num(p[0]) is not None and as_num(p[1]) is not None:
            out.append((p[0], p[1]))
    return tuple(out)


@dataclass(frozen=True)
class Series:
    """Recent (time, value) points for the live panel; ``mode``: 1 target-only, 0 speculative."""

    batch: tuple[Point, ...] = ()
    gen_throughput: tuple[Point, ...] = ()
    accept_len: tuple[Point, ...] = ()
    threshold: tuple[Point, ...] = ()
    mode: tuple[Point, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {name: [list(p) for p in getattr(self, name)] for name in SERIES}

    @classmethod
    def from_json(cls, raw: object) -> Series:
        r = as_obj(raw)
        return cls(*(_points(r.get(n)) for n in SERIES))


@dataclass(frozen=True)
class Switch:
    ts: str | None
    mode: str
    batch: int | None = None
    threshold: int | None = None
    rank: str | None = None
    forced: bool = False  # made by a forced mode, not by the threshold rule

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "mode": self.mode,
            "batch": self.batch,
            "threshold": self.threshold,
            "rank": self.rank,
            "forced": self.forced,
        }

    @classmethod
    def from_json(cls, raw: object) -> Switch | None:
        r = as_obj(raw)
        mode = r.get("mode")
        if mode not in MODES:
            return None
        return cls(
            ts=as_str(r.get("ts")),
            mode=mode,
            batch=as_int(r.get("batch")),
            threshold=as_int(r.get("threshold")),
            rank=as_str(r.get("rank")),
            forced=r.get("forced") is True,
        )


@dataclass(frozen=True)
class ModeShare:
    share: float | None = None  # of the time
    tok_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"share": self.share, "tok_s": self.tok_s}


@dataclass(frozen=True)
class Timeline:
    """Every switch (newest last) and, per mode, the share of time and tok/s in it (the
    current run's); ``earlier``: how many switches the earlier runs had."""

    switches: tuple[Switch, ...] = ()
    per_mode: Mapping[str, ModeShare] = field(default_factory=lambda: MappingProxyType({m: ModeShare() for m in MODES}))
    earlier: int = 0

    @classmethod
    def from_json(cls, switches: object, per_mode: object) -> Timeline:
        pm = as_obj(per_mode)
        return cls(
            switches=tuple(s for s in map(Switch.from_json, as_list(switches)) if s is not None),
            per_mode=MappingProxyType(
                {m: ModeShare(as_num(as_obj(pm.get(m)).get("share")), as_num(as_obj(pm.get(m)).get("tok_s"))) for m in MODES}
            ),
        )


@dataclass(frozen=True)
class LogStatus:
    total: int = 0
    dropped: int = 0
    truncated: int = 0
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "dropped": self.dropped, "truncated": self.truncated, "path": self.path}

    @classmethod
    def from_json(cls, raw: object) -> LogStatus:
        r = as_obj(raw)
        return cls(
            as_int(r.get("total")) or 0, as_int(r.get("dropped")) or 0, as_int(r.get("truncated")) or 0, as_str(r.get("path"))
        )


# ---- the whole -------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionSnapshot:
    url: str
    profile: str | None = None
    attached: bool = False
    run: RunStatus = RunStatus()
    server: ServerStatus = ServerStatus()
    spec: SpecStatus = SpecStatus()
    last_change: SettingChange | None = None  # the last runtime setting change, of any key
    live: Load = Load()  # the load of the last poll the server answered (its ts)
    series: Series = Series()
    timeline: Timeline = Timeline()
    gpus: GpuStatus = GpuStatus()
    verify: Verification = Verification()
    logs: LogStatus = LogStatus()

    @property
    def name(self) -> str:
        """How to call this server in one word: its profile, else its URL."""
        return self.profile or self.url

    @property
    def idle(self) -> bool:
        """The server answers and has nothing to decode: decode batch 0, nothing queued."""
        return self.server.reachable and self.live.batch == 0 and not self.live.queue

    def to_json(self) -> dict[str, Any]:
        change = self.last_change.to_json() if self.last_change else None
        return {
            "profile": self.profile,
            "url": self.url,
            "attached": self.attached,
            "run": self.run.to_json(),
            "server": self.server.to_json(),
            "spec": self.spec.to_json(),
            "last_change": change,
            "threshold_change": change,  # the old name of last_change: an alias for one release (docs/architecture.md)
            "live": self.live.to_json(),
            "series": self.series.to_json(),
            "switches": [s.to_json() for s in self.timeline.switches],
            "per_mode": {m: s.to_json() for m, s in self.timeline.per_mode.items()},
            "gpus": self.gpus.to_json(),
            "verify": self.verify.to_json(),
            "logs": self.logs.to_json(),
        }

    @classmethod
    def from_json(cls, raw: Any) -> SessionSnapshot:
        r = as_obj(raw)
        return cls(
            url=as_str(r.get("url")) or "",
            profile=as_str(r.get("profile")),
            attached=r.get("attached") is True,
            run=RunStatus.from_json(r.get("run")),
            server=ServerStatus.from_json(r.get("server")),
            spec=SpecStatus.from_json(r.get("spec")),
            last_change=SettingChange.from_json(r.get("last_change", r.get("threshold_change"))),
            live=Load.from_json(r.get("live")),
            series=Series.from_json(r.get("series")),
            timeline=Timeline.from_json(r.get("switches"), r.get("per_mode")),
            gpus=GpuStatus.from_json(r.get("gpus")),
            verify=Verification.from_json(r.get("verify")),
            logs=LogStatus.from_json(r.get("logs")),
        )


EMPTY_SNAPSHOT = SessionSnapshot(url="")  # nothing known yet (a screen before its first snapshot)
