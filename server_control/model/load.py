"""One server's decode load: the telemetry sample's and the snapshot's (one type, both)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model.json_read import as_int, as_num, as_obj


@dataclass(frozen=True)
class Load:
    """A server's decode load, summed over its DP ranks (``batch`` is num_running_reqs): what a
    poll learned (``source``: "loads" | "metrics" | "logs") and, in the snapshot, when
    (``ts``). ``to_json`` is the snapshot's ``live`` (``source`` is not part of it)."""

    batch: int | None = None
    queue: int | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    source: str | None = None
    ts: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "queue": self.queue,
            "token_usage": self.token_usage,
            "gen_throughput": self.gen_throughput,
            "accept_len": self.accept_len,
            "accept_rate": self.accept_rate,
            "ts": self.ts,
        }

    @classmethod
    def from_json(cls, raw: object) -> Load:
        r = as_obj(raw)
        return cls(
            batch=as_int(r.get("batch")),
            queue=as_int(r.get("queue")),
            token_usage=as_num(r.get("token_usage")),
            gen_throughput=as_num(r.get("gen_throughput")),
            accept_len=as_num(r.get("accept_len")),
            accept_rate=as_num(r.get("accept_rate")),
            ts=as_num(r.get("ts")),
        )
