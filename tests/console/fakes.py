"""Deterministic stand-ins for widget unit tests and snapshot tests ONLY.

``FakeSession`` satisfies ``SessionLike`` (server_control/session/api.py) over a fixed
snapshot kept as the JSON `status --json` prints (``fake.snap``, which tests edit) and read
back through ``SessionSnapshot.from_json``; integration tests use the real Session.
"""

from __future__ import annotations

import copy

from server_control.advice.source import SourceError
from server_control.advice.words import Advice
from server_control.logs import LogStore, parse_text
from server_control.model.operation import OperationResult
from server_control.model.snapshot import SessionSnapshot, SettingChange
from server_control.model.verification import Verification
from server_control.model.vocabulary import Outcome
from server_control.state.history import Recorded


def sample_snapshot() -> dict:
    """A fixed snapshot with every section filled (deterministic: no clocks)."""
    batch = [1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 7, 6, 5, 4, 3, 2, 1, 2, 4, 6, 8, 10, 12, 10, 8, 6, 4, 2]
    return {
        "profile": "demo",
        "url": "http://127.0.0.1:30000",
        "attached": False,
        "run": {
            "state": "ready",
            "pid": 4242,
            "pgid": 4242,
            "started_at": "2026-11-29T10:00:00",
            "uptime_s": 3725.0,
            "port": 30000,
            "restarts": 1,
            "log_path": "/tmp/x.log",
            "exit_code": None,
            "fatal_reason": None,
            "processes": [4242, 4243, 4244],
        },
        "server": {
            "reachable": True,
            "error": None,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "tp_size": 2,
            "dp_size": 1,
            "version": "0.5.23",
            "foreign": False,
            "latency": {
                "available": True,
                "reason": None,
                "windows": [
                    {
                        "window_s": 15.0,
                        "span_s": 14.0,
                        "ttft": {"count": 41, "p50": 0.031, "p95": 0.049, "p99": 0.086},
                        "itl": {"count": 3200, "p50": 0.016, "p95": 0.023, "p99": 0.037},
                        "e2e": {"count": 40, "p50": 3.3, "p95": 7.0, "p99": 7.8},
                        "queue": {"count": 41, "p50": 0.0004, "p95": 0.0009, "p99": 0.001},
                        "itl_mean_by_mode": {"speculative": 0.021, "target_only": 0.016},
                    }
                ],
                "stalled": False,
                "stall": None,
            },
        },
        "spec": {
            "mode": "target_only",
            "threshold": 5,
            "threshold_counts": "decode_requests",
            "low_mark": 4,
            "hysteresis": 1,
            "min_dwell_steps": 10,
            "force": "auto",
            "switch_count": 3,
            "cold_draft_above": 0,
            "cold_steps": 0,
            "steps": {},
            "seconds": {},
            "tokens": {},
            "supports_runtime_threshold": True,
            "switch_rate": {"per_min": 1.5, "count": 3, "window_s": 120.0, "flapping": False, "suggestion": None},
            "health": {"active": True, "reason": None, "rank_fault": None, "num_steps": 0, "accept_len": None, "ranks": []},
        },  # per-rank rows: tests/sglang/test_rank_resources.py
        "last_change": {
            "requested": 5,
            "state": "applied",
            "detail": "",
            "ranks": [True],
            "key": "speculative_disable_batch_threshold",
        },
        "threshold_change": {
            "requested": 5,
            "state": "applied",
            "detail": "",
            "ranks": [True],
            "key": "speculative_disable_batch_threshold",
        },  # last_change's old name
        "live": {
            "batch": 7,
            "queue": 2,
            "token_usage": 0.12,
            "gen_throughput": 512.3,
            "accept_len": 2.8,
            "accept_rate": 0.45,
            "ts": 0.0,
        },
        "series": {
            "batch": [[i, v] for i, v in enumerate(batch)],
            "gen_throughput": [[i, 100.0 * v] for i, v in enumerate(batch)],
            "accept_len": [[i, 2.5] for i in range(len(batch))],
            "threshold": [[i, 5] for i in range(len(batch))],
            "mode": [[i, int(v > 5)] for i, v in enumerate(batch)],
        },
        "switches": [
            {"ts": "2026-11-29T10:01:02", "mode": "target_only", "batch": 6, "threshold": 5, "rank": "TP0"},
            {"ts": "2026-11-29T10:01:40", "mode": "speculative", "batch": 3, "threshold": 5, "rank": "TP0"},
            {"ts": "2026-11-29T10:02:15", "mode": "target_only", "batch": 7, "threshold": 5, "rank": "TP0"},
        ],
        "per_mode": {"speculative": {"share": 0.6, "tok_s": 301.0}, "target_only": {"share": 0.4, "tok_s": 702.0}},
        "gpus": {"available": False, "reason": "NVML Shared Library Not Found", "devices": []},
        "verify": {
            "summary": "pass",
            "layers": [
                {
                    "name": "configuration",
                    "status": "pass",
                    "evidence": "/server_info speculative_disable_batch_threshold=5",
                    "cause": None,
                },
                {
                    "name": "initialisation",
                    "status": "pass",
                    "evidence": "[TP0] Dynamic speculation disable enabled: threshold=5",
                    "cause": None,
                },
                {
                    "name": "runtime",
                    "status": "pass",
                    "evidence": "switched to target-only (decode batch 7 > threshold 5)",
                    "cause": None,
                },
            ],
        },
        "logs": {"total": 6, "dropped": 0, "truncated": 0, "path": "/tmp/x.log"},
    }


SAMPLE_LINES = [
    "[2026-11-29 10:00:00] server_args=ServerArgs(speculative_disable_batch_threshold=5)",
    "[2026-11-29 10:00:01 TP0] Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10",
    "[2026-11-29 10:00:01 TP1] Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10",
    "[2026-11-29 10:00:02] The server is fired up and ready to roll!",
    "[2026-11-29 10:00:05 TP0] Decode batch, #running-req: 7, #token: 900, token usage: 0.12, "
    "accept len: 2.80, accept rate: 0.45, cuda graph: True, gen throughput (token/s): 512.30, "
    "#queue-req: 2",
    "[2026-11-29 10:00:06 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)",
    "[2026-11-29 10:00:07 TP1] WARNING: something odd",
    '[2026-11-29 10:00:08 TP0] Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom',
]


class FakeSession:
    """Implements the Session API over a fixed snapshot. Control calls record themselves in
    ``calls`` and answer "applied" at once (the pending state is tested with a snapshot
    that holds it)."""

    def __init__(self, snapshot: dict | None = None, lines=SAMPLE_LINES) -> None:
        self.snap = copy.deepcopy(snapshot or sample_snapshot())
        self.url = self.snap.get("url", "http://127.0.0.1:30000")
        self.store = LogStore()
        self.store.extend(parse_text("\n".join(lines) + "\n"))
        self.subscribers: list = []
        self.calls: list[tuple] = []
        self.started = False
        self.closed_with: bool | None = None
        self.hist: list = []  # HistPoints the chart's zoomed views draw (tests fill it)
        self.hist_until: float | None = None  # the newest of them "read from the file"

    def subscribe(self, callback):
        self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback) if callback in self.subscribers else None

    def publish(self, topic: str) -> None:
        for cb in self.subscribers:
            cb(topic)

    def add_lines(self, lines: list[str]) -> None:
        self.store.extend(parse_text("\n".join(lines) + "\n"))
        self.publish("logs")

    def snapshot(self) -> SessionSnapshot:
        return SessionSnapshot.from_json(self.snap)

    async def start(self) -> None:
        self.started = True

    async def set_threshold(self, n: object) -> OperationResult:
        self.calls.append(("set_threshold", n))
        self.snap["spec"]["threshold"] = n
        self.snap["last_change"] = {
            "requested": n,
            "state": "applied",
            "detail": "",
            "ranks": [True],
            "key": "speculative_disable_batch_threshold",
        }
        self.publish("snapshot")
        return OperationResult.of_change("threshold", SettingChange.from_json(self.snap["last_change"]))

    async def set_force(self, mode: object) -> OperationResult:
        self.calls.append(("set_force", mode))
        self.snap["spec"]["force"] = mode
        return OperationResult.of_change("force", SettingChange(mode, "applied", "", (True,)))

    async def set_setting(self, key: str, value: object) -> OperationResult:
        self.calls.append(("set_setting", key, value))
        self.snap["last_change"] = {"requested": value, "state": "applied", "detail": "", "ranks": [True], "key": key}
        self.publish("snapshot")
        return OperationResult.of_change(key, SettingChange.from_json(self.snap["last_change"]))

    async def launch(self) -> OperationResult:
        self.calls.append(("launch",))
        return OperationResult("launch", Outcome.DONE, "launched")

    async def stop(self) -> OperationResult:
        self.calls.append(("stop",))
        return OperationResult("stop", Outcome.DONE, "stopped")

    async def restart(self) -> OperationResult:
        self.calls.append(("restart",))
        return OperationResult("restart", Outcome.DONE, "restarted")

    async def verify(self) -> OperationResult:
        self.calls.append(("verify",))
        ver = Verification.from_json(self.snap["verify"])
        return OperationResult("verify", Outcome.DONE, f"verification: {ver.summary}", verification=ver)

    async def close(self, stop_server: bool = False) -> None:
        self.closed_with = stop_server

    def verification(self) -> Verification:
        return Verification.from_json(self.snap["verify"])

    async def advice(self) -> Advice:
        """The fake has no cost curves (the strip stays hidden; no request leaves the test)."""
        raise SourceError("the fake session has no cost curves")

    @property
    def polls(self) -> int:
        return 1  # the fixed snapshot stands for one poll

    def history(self) -> Recorded:
        return Recorded(tuple(self.hist), self.hist_until)

    def poke(self) -> None:
        self.calls.append(("poke",))

    async def read_settings(self) -> dict:
        spec = self.snap["spec"]
        return {"thresholds": [spec["threshold"]], "force": [spec["force"]], "supported": True}

    def prepare_control(self) -> None:
        self.calls.append(("prepare_control",))

    def log_caught_up(self, size_at: int | None = None) -> bool:
        return True
