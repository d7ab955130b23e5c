"""HTTP access lines (uvicorn's, as SGLang and the simulator write them) and which of them
are polling: a successful read of an endpoint that monitors poll over and over.

    INFO:     127.0.0.1:45566 - "GET /server_info HTTP/1.1" 200 OK      -> polling
    INFO:     127.0.0.1:45566 - "GET /health HTTP/1.1" 503 Service ...  -> not (a failure is news)
    INFO:     127.0.0.1:45566 - "POST /generate HTTP/1.1" 200 OK        -> not (real traffic)

Any client's polling counts (this console's, a second console's, a load balancer's health
probe, Prometheus scraping /metrics): the lines say nothing that the screen does not, and
at one request per second per endpoint they bury the server's own lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from server_control.logs.record import Record
from server_control.protocol import sim_gpus

# Read-only endpoints polled by specconsole (telemetry/http_poll.py, the supervisor's health
# probe, control read-back), by SGLang's gateway (smg registers and monitors a worker through
# /health, /v1/models[/{id}], /server_info, /model_info, /v1/loads), by Prometheus, and the
# demo's GPU panel (the simulator's /sim/gpus: server_control/protocol/sim_gpus.py).
POLL_PATHS = frozenset(
    {
        "/health",
        "/health_generate",
        "/ready",
        "/server_info",
        "/get_server_info",
        "/v1/loads",
        "/get_load",
        "/metrics",
        "/v1/models",
        "/get_model_info",
        "/model_info",
        sim_gpus.PATH,
    }
)
POLL_PREFIXES = ("/v1/models/",)
POLL_METHODS = frozenset({"GET", "HEAD"})

_REQUEST = re.compile(r'"([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})')


@dataclass(frozen=True)
class AccessLine:
    method: str
    path: str  # without the query string
    status: int

    @property
    def polling(self) -> bool:
        return (
            self.method in POLL_METHODS
            and 200 <= self.status < 400
            and (self.path in POLL_PATHS or self.path.startswith(POLL_PREFIXES))
        )


def parse_access(raw: str) -> AccessLine | None:
    """The request of an access line, or None when ``raw`` is not one."""
    if "HTTP/" not in raw:
        return None
    m = _REQUEST.search(raw)
    if m is None:
        return None
    method, target, status = m.groups()
    return AccessLine(method, target.split("?", 1)[0], int(status))


def is_polling(rec: Record | str) -> bool:
    """True for a record (or a raw line) that is a successful poll of a read-only endpoint."""
    raw = rec if isinstance(rec, str) else getattr(rec, "raw", "")
    if isinstance(rec, str) or getattr(rec, "kind", "http") == "http":
        line = parse_access(raw)
        return line is not None and line.polling
    return False
