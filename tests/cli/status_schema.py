"""The exact JSON schema of `specconsole status --json` (the session snapshot at the edge):
every key, in order, and the JSON type of every value. Pinned before the snapshot became
typed dataclasses; a consumer of the JSON (scripts, the fleet's remote members) relies on it."""

from __future__ import annotations

NONE = type(None)
NUM = (int, float)
INT = (int,)
STR = (str,)


def opt(*types) -> tuple:
    return (*types, NONE)


class MapOf:
    """A JSON object with free keys (str) and values of one schema."""

    def __init__(self, value) -> None:
        self.value = value


class ListOf:
    def __init__(self, item) -> None:
        self.item = item


class Pair:
    """A [t, v] series point."""


RUN = {
    "state": STR,
    "pid": opt(int),
    "pgid": opt(int),
    "started_at": opt(str),
    "uptime_s": opt(*NUM),
    "port": opt(int),
    "restarts": INT,
    "log_path": opt(str),
    "exit_code": opt(int),
    "fatal_reason": opt(str),
    "processes": ListOf(INT),
}
RUN_SUPERVISED = {
    **RUN,
    "supervising": (bool,),
    "last_error": opt(str),
    "next_restart_in_s": opt(*NUM),
    "runtime": MapOf((int, str)),
    "runtime_note": opt(str),
    "supervisor": opt({"pid": INT, "kind": STR, "since": STR}),
    "last_exit": opt(str),
    "lost_supervisor": opt({"pid": INT, "kind": STR, "since": STR}),
    "took_over_from": opt({"pid": INT, "kind": STR, "since": STR}),
    "supervisor_note": opt(STR),
}
CHANGE = {"requested": opt(int, str), "state": STR, "detail": STR, "ranks": ListOf((bool,)), "key": opt(str)}
SUGGESTION = {"key": STR, "name": STR, "value": INT, "current": INT, "effect": STR}
SWITCH_RATE = {"per_min": NUM, "count": INT, "window_s": NUM, "flapping": (bool,), "suggestion": (SUGGESTION, NONE)}
SERIES = ListOf(Pair)
MODE_SHARE = {"share": opt(*NUM), "tok_s": opt(*NUM)}
RANK = {
    "rank": STR,
    "memory": {"used_gib": opt(*NUM), "estimate_gib": opt(*NUM), "free_gib": opt(*NUM), "reserved_gib": opt(*NUM)},
    "forwards": MapOf(MapOf(INT)),
    "failed": opt(str),
}  # the steps=0 state per rank
GPU = {
    "index": INT,
    "name": STR,
    "util": opt(*NUM),
    "mem_used_mb": opt(*NUM),
    "mem_total_mb": opt(*NUM),
    "power_w": opt(*NUM),
    "temp_c": opt(*NUM),
    "pids": ListOf(INT),
    "sm_active_pct": opt(*NUM),
    "tensor_active_pct": opt(*NUM),
    "dram_bw_pct": opt(*NUM),
}


PERCENTILES = {"count": INT, "p50": opt(*NUM), "p95": opt(*NUM), "p99": opt(*NUM)}
LATENCY_WINDOW = {
    "window_s": NUM,
    "span_s": NUM,
    "ttft": PERCENTILES,
    "itl": PERCENTILES,
    "e2e": PERCENTILES,
    "queue": PERCENTILES,
    "itl_mean_by_mode": MapOf(NUM),
}


def snapshot_schema(run: dict) -> dict:
    return {
        "profile": opt(str),
        "url": STR,
        "attached": (bool,),
        "run": run,
        "server": {
            "reachable": (bool,),
            "error": opt(str),
            "model": opt(str),
            "tp_size": opt(int),
            "dp_size": opt(int),
            "version": opt(str),
            "foreign": (bool,),
            "latency": {
                "available": (bool,),
                "reason": opt(str),
                "windows": ListOf(LATENCY_WINDOW),
                "stalled": (bool,),
                "stall": opt(str),
            },
        },
        "spec": {
            "mode": opt(str),
            "threshold": opt(int),
            "threshold_counts": (str,),
            "low_mark": opt(int),
            "hysteresis": opt(int),
            "min_dwell_steps": opt(int),
            "force": opt(str),
            "switch_count": INT,
            "cold_draft_above": opt(int),
            "cold_steps": opt(int),
            "steps": MapOf(NUM),
            "seconds": MapOf(NUM),
            "tokens": MapOf(NUM),
            "supports_runtime_threshold": opt(bool),
            "switch_rate": SWITCH_RATE,
            "health": {
                "active": opt(bool),
                "reason": opt(str),
                "rank_fault": opt(str),
                "num_steps": opt(int),
                "accept_len": opt(*NUM),
                "ranks": ListOf(RANK),
            },
        },
        "last_change": (CHANGE, NONE),
        "threshold_change": (CHANGE, NONE),  # alias of last_change for one release
        "live": {
            "batch": opt(int),
            "queue": opt(int),
            "token_usage": opt(*NUM),
            "gen_throughput": opt(*NUM),
            "accept_len": opt(*NUM),
            "accept_rate": opt(*NUM),
            "ts": opt(*NUM),
        },
        "series": {"batch": SERIES, "gen_throughput": SERIES, "accept_len": SERIES, "threshold": SERIES, "mode": SERIES},
        "switches": ListOf(
            {"ts": opt(str), "mode": STR, "batch": opt(int), "threshold": opt(int), "rank": opt(str), "forced": (bool,)}
        ),
        "per_mode": {"speculative": MODE_SHARE, "target_only": MODE_SHARE},
        "gpus": {"available": (bool,), "reason": opt(str), "devices": ListOf(GPU)},
        "verify": {"summary": STR, "layers": ListOf({"name": STR, "status": STR, "evidence": opt(str), "cause": opt(str)})},
        "logs": {"total": INT, "dropped": INT, "truncated": INT, "path": opt(str)},
    }


def problems(value, schema, path: str = "$") -> list[str]:
    """Every place where ``value`` departs from ``schema`` (keys in order, JSON types)."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {value!r}"]
        if list(value) != list(schema):
            return [f"{path}: keys {list(value)} != {list(schema)}"]
        return [p for k, s in schema.items() for p in problems(value[k], s, f"{path}.{k}")]
    if isinstance(schema, MapOf):
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {value!r}"]
        return [
            p
            for k, v in value.items()
            for p in ([f"{path}: key {k!r} not a string"] if not isinstance(k, str) else problems(v, schema.value, f"{path}.{k}"))
        ]
    if isinstance(schema, ListOf):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r}"]
        return [p for i, v in enumerate(value) for p in problems(v, schema.item, f"{path}[{i}]")]
    if schema is Pair:
        ok = isinstance(value, list) and len(value) == 2 and all(isinstance(x, NUM) and not isinstance(x, bool) for x in value)
        return [] if ok else [f"{path}: expected [t, v] numbers, got {value!r}"]
    if isinstance(schema, tuple) and schema and isinstance(schema[0], (dict, MapOf, ListOf)):
        return [] if value is None and NONE in schema else problems(value, schema[0], path)
    if isinstance(value, bool) and bool not in schema:
        return [f"{path}: expected {schema}, got a boolean {value!r}"]
    return [] if isinstance(value, schema) else [f"{path}: expected {schema}, got {value!r}"]
