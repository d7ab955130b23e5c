"""Typed telemetry samples: what one HTTP poll learned about a server.

Parsing here is pure (dicts in, dataclasses out) and tolerant: a field of the wrong type
becomes None, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from server_control.model.latency import LatencyStatus
from server_control.model.load import Load
from server_control.protocol import decision, runtime_settings
from server_control.protocol.runtime_settings import RuntimeSetting

if TYPE_CHECKING:
    from server_control.logs import Record


def num(value: object) -> float | None:
    """A finite number or None (bools, strings, NaN and infinities give None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    if f != f or f in (float("inf"), float("-inf")):
        return None
    return f


def intval(value: object) -> int | None:
    f = num(value)
    return None if f is None else int(f)


def _setting_value(setting: RuntimeSetting, raw: object) -> int | str | None:
    if setting.kind is str:
        return raw if isinstance(raw, str) else None
    return intval(raw)


@dataclass
class RankState:
    """One DP rank's entry of /server_info internal_states."""

    dp_rank: int
    has_threshold_key: bool
    threshold: int | None
    hysteresis: int | None
    min_dwell_steps: int | None
    force: str | None
    dynamic: dict[str, Any] | None  # SpecSwitch.snapshot() as published by the patch, if any
    last_gen_throughput: float | None
    avg_spec_accept_length: float | None
    # every runtime setting (protocol/runtime_settings.py) by its key, as published: an
    # integer one as an int or None, a named one as its name or None
    settings: dict[str, int | str | None] = field(default_factory=dict)

    @property
    def mode(self) -> str | None:
        mode = (self.dynamic or {}).get("mode")
        return mode if mode in decision.MODES else None

    @classmethod
    def from_json(cls, index: int, raw: object) -> RankState:
        raw = raw if isinstance(raw, dict) else {}
        dynamic = raw.get(decision.STATE_KEY)
        force = raw.get(decision.FORCE_KEY)
        return cls(
            dp_rank=index,
            has_threshold_key=decision.THRESHOLD_KEY in raw,
            threshold=intval(raw.get(decision.THRESHOLD_KEY)),
            hysteresis=intval(raw.get(decision.HYSTERESIS_KEY)),
            min_dwell_steps=intval(raw.get(decision.DWELL_KEY)),
            force=force if isinstance(force, str) else None,
            dynamic=dynamic if isinstance(dynamic, dict) else None,
            last_gen_throughput=num(raw.get("last_gen_throughput")),
            avg_spec_accept_length=num(raw.get("avg_spec_accept_length")),
            settings={s.key: _setting_value(s, raw.get(s.key)) for s in runtime_settings.SETTINGS},
        )


@dataclass
class Sample:
    ts: float  # time.time() when the poll finished
    reachable: bool
    error: str | None = None
    load: Load = field(default_factory=Load)
    ranks: list[RankState] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)  # the flat server args of /server_info
    model: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    version: str | None = None
    poll_s: float | None = None  # how long the poll took
    next_poll_s: float | None = None  # when the poller polls again, from this poll's start
    latency: LatencyStatus | None = None  # the /metrics histograms' windows (telemetry/latency.py)

    @property
    def supports_runtime_threshold(self) -> bool | None:
        """True when every rank's internal state holds the threshold key (patched server)."""
        if not self.ranks:
            return None
        return all(r.has_threshold_key for r in self.ranks)

    @property
    def threshold(self) -> int | None:
        for r in self.ranks:
            if r.threshold is not None:
                return r.threshold
        return intval(self.args.get(decision.THRESHOLD_KEY))

    @property
    def mode(self) -> str | None:
        modes = [r.mode for r in self.ranks if r.mode]
        if not modes:
            return None
        return decision.TARGET_ONLY if decision.TARGET_ONLY in modes else modes[0]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _sum(values: list[float]) -> float | None:
    return sum(values) if values else None


def load_from_loads(body: object) -> Load | None:
    """/v1/loads?include=core,memory,spec JSON -> Load, or None if it is not that shape."""
    if not isinstance(body, dict) or not isinstance(body.get("loads"), list):
        return None
    running: list[float] = []
    waiting: list[float] = []
    usage: list[float] = []
    thr: list[float] = []
    acc_len: list[float] = []
    acc_rate: list[float] = []
    for entry in body["loads"]:
        if not isinstance(entry, dict):
            continue
        for key, bucket in (
            ("num_running_reqs", running),
            ("num_waiting_reqs", waiting),
            ("token_usage", usage),
            ("gen_throughput", thr),
        ):
            v = num(entry.get(key))
            if v is not None:
                bucket.append(v)
        spec = entry.get("speculative")
        if isinstance(spec, dict):
            for key, bucket in (("accept_length", acc_len), ("accept_rate", acc_rate)):
                v = num(spec.get(key))
                if v is not None:
                    bucket.append(v)
    if not running:
        return None
    return Load(
        batch=int(sum(running)),
        queue=intval(_sum(waiting)),
        token_usage=_mean(usage),
        gen_throughput=_sum(thr),
        accept_len=_mean(acc_len),
        accept_rate=_mean(acc_rate),
        source="loads",
    )


_METRIC_FIELDS = {
    "sglang:num_running_reqs": ("batch", "sum"),
    "sglang:num_queue_reqs": ("queue", "sum"),
    "sglang:token_usage": ("token_usage", "mean"),
    "sglang:gen_throughput": ("gen_throughput", "sum"),
    "sglang:spec_accept_length": ("accept_len", "mean"),
    "sglang:spec_accept_rate": ("accept_rate", "mean"),
}


def load_from_metrics(text: str) -> Load | None:
    """Prometheus text exposition -> Load, through prometheus_client's real parser."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                spec = _METRIC_FIELDS.get(s.name)
                v = num(s.value)
                if spec and v is not None:
                    values.setdefault(s.name, []).append(v)
    except Exception:  # noqa: BLE001 - garbage exposition text: no load from it
        return None
    if "sglang:num_running_reqs" not in values:
        return None
    got: dict[str, Any] = {}
    for name, (attr, how) in _METRIC_FIELDS.items():
        vs = values.get(name)
        if vs:
            got[attr] = _sum(vs) if how == "sum" else _mean(vs)
    return Load(source="metrics", **{**got, "batch": intval(got.get("batch")), "queue": intval(got.get("queue"))})


def _dp_group(rec: Record) -> str:
    rank = getattr(rec, "rank", None) or ""
    return rank.split(" ")[0] if rank.startswith("DP") else ""


def _is_decode(rec: Record) -> bool:
    return getattr(rec, "kind", None) == "decode" and getattr(rec, "running_req", None) is not None


def record_age_s(ts: object, now: float) -> float | None:
    """Seconds from a log time stamp (local time, as SGLang writes it; a bare time is
    today's) to ``now``; None when there is no usable stamp."""
    if not isinstance(ts, str) or not ts:
        return None
    try:
        if "T" in ts:
            stamp = datetime.fromisoformat(ts)
        else:
            day = datetime.fromtimestamp(now).date()
            stamp = datetime.combine(day, datetime.strptime(ts.split(".")[0], "%H:%M:%S").time())
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return now - stamp.timestamp()
    return now - stamp.astimezone(UTC).timestamp()


def fresh_decode_load(records: list[Any], after_seq: int, now: float, fresh_s: float) -> Load | None:
    """The load from decode records newer than ``after_seq`` (store seq) and stamped within
    ``fresh_s`` seconds of ``now`` (a second of clock skew allowed), when every DP group
    that has decode records in ``records`` has a fresh one; else None (ask the server)."""
    decode = [r for r in records if _is_decode(r)]
    fresh = [
        r
        for r in decode
        if (getattr(r, "seq", 0) or 0) > after_seq
        and (age := record_age_s(getattr(r, "ts", None), now)) is not None
        and -1.0 <= age <= fresh_s
    ]
    if not fresh or {_dp_group(r) for r in fresh} != {_dp_group(r) for r in decode}:
        return None
    return load_from_records(fresh)


def load_from_records(records: list[Any]) -> Load | None:
    """Latest decode record per DP group (rank tag before ' TP') -> Load; None if none."""
    latest: dict[str, object] = {}
    for rec in records:
        if _is_decode(rec):
            latest[_dp_group(rec)] = rec
    if not latest:
        return None
    recs = list(latest.values())

    def vals(attr: str) -> list[float]:
        return [v for v in (num(getattr(r, attr, None)) for r in recs) if v is not None]

    return Load(
        batch=intval(_sum(vals("running_req"))),
        queue=intval(_sum(vals("queue_req"))),
        token_usage=_mean(vals("token_usage")),
        gen_throughput=_sum(vals("gen_throughput")),
        accept_len=_mean(vals("accept_len")),
        accept_rate=_mean(vals("accept_rate")),
        source="logs",
    )


def sample_from_server_info(ts: float, info: dict[str, Any]) -> Sample:
    states = info.get("internal_states")
    ranks = [RankState.from_json(i, s) for i, s in enumerate(states)] if isinstance(states, list) else []
    model = info.get("served_model_name") or info.get("model_path")
    version = info.get("version")
    return Sample(
        ts=ts,
        reachable=True,
        ranks=ranks,
        args={k: v for k, v in info.items() if k != "internal_states"},
        model=model if isinstance(model, str) else None,
        tp_size=intval(info.get("tp_size")),
        dp_size=intval(info.get("dp_size")),
        version=version if isinstance(version, str) else None,
    )
