"""SGLang's gateway (smg, the Shepherd Model Gateway) in front of a fleet's members.

    gw = Gateway(fleet_spec, state_dir)          # needs fleet_spec.gateway
    await gw.start(worker_urls)                  # adopt a live gateway run, or launch one
    status = await gw.read()                     # GatewayStatus: health + worker list
    await gw.reconcile(worker_urls)              # add missing members, drop strangers
    await gw.stop()

The gateway is a process like a server: launched in its own session with its log in the
state dir, a run record (adopted by the next console), crash restart with backoff, and
a clean stop of its process group, all by ``server_control.supervision.supervisor.Supervisor``, which
gets a ``GatewayProfile`` in place of a server profile. smg is started as
``python -m smg launch`` on 127.0.0.1-only ports, with ``--disable-tokenizer-autoload`` (a
router that load-balances needs no tokenizer, and without it smg would try to download
one from the model hub) and its Prometheus listener on a free loopback port (its default
is 0.0.0.0:29000).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server_control.config.profile import LaunchSpec, Profile, ProfileError
from server_control.fleet.gateway_metrics import GatewayRates, TrafficReader
from server_control.fleet.spec import FleetSpec, GatewaySpec
from server_control.host.ports import free_port
from server_control.model.vocabulary import OtherState, RunState
from server_control.net import tls
from server_control.net.http import bounded_request
from server_control.net.lean_httpx import httpx
from server_control.sanitize import clean_json
from server_control.state.state_dir import resolve_state_dir

if TYPE_CHECKING:
    from server_control.proc.process import StopResult
    from server_control.state.runs import RunRecord


SMG_MODULE = "smg"
HEALTH = {"path": "/health", "interval_s": 1.0, "timeout_s": 5.0, "failures": 3}
ADD_RETRY_S = 30.0
RESTART = {
    "enabled": True,
    "backoff_initial_s": 1.0,
    "backoff_max_s": 30.0,
    "burst": 5,
    "window_s": 60.0,
    "stop_grace_s": 5.0,
    "keep_logs": 10,
}


@dataclass(frozen=True)
class GatewayProfile:
    """What ``Supervisor`` reads of a profile, for the gateway process."""

    name: str
    spec: GatewaySpec
    worker_urls: tuple[str, ...]
    path: Path | None = None
    kind: str = "smg"
    health: dict[str, Any] = field(default_factory=lambda: dict(HEALTH))
    restart: dict[str, Any] = field(default_factory=lambda: dict(RESTART))

    @property
    def host(self) -> str:
        return self.spec.host

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def url(self) -> str:
        return self.spec.url

    @property
    def stop_grace_s(self) -> float:
        return self.spec.stop_grace_s

    @property
    def dynamic(self) -> dict[str, Any]:
        return {}  # no speculation settings: nothing to re-apply after a restart

    def api_key(self, preview: list[str] | None = None) -> str | None:
        return None

    def admin_api_key(self, preview: list[str] | None = None) -> str | None:
        return None

    def python(self) -> str:
        if not self.spec.python:
            if importlib.util.find_spec(SMG_MODULE) is None:
                raise ProfileError(
                    f"[gateway] python: smg is not installed for {sys.executable} (pip install smg)", None, ("[gateway] python",)
                )
            return sys.executable
        return os.path.expanduser(self.spec.python)

    def argv(self, prometheus_port: int) -> tuple[str, ...]:
        s = self.spec
        workers = ("--worker-urls", *self.worker_urls) if self.worker_urls else ()
        return (
            self.python(),
            "-m",
            SMG_MODULE,
            "launch",
            "--host",
            s.host,
            "--port",
            str(s.port),
            *workers,
            "--policy",
            s.policy,
            "--disable-tokenizer-autoload",
            "--prometheus-host",
            "127.0.0.1",
            "--prometheus-port",
            str(prometheus_port),
            "--health-check-interval-secs",
            str(s.health_check_interval_s),
            "--log-level",
            "info",
            # in-flight requests get this long after SIGTERM (smg's default, 180 s, outlasts any
            # stop grace and would end in SIGKILL)
            "--shutdown-grace-period-secs",
            str(max(1, int(s.stop_grace_s) - 2)),
            *s.extra_args,
        )

    def log_dir(self, state_dir: Path) -> Path:
        d = self.spec.log_dir
        return Path(os.path.expanduser(d)) if d else Path(state_dir) / "logs" / self.name

    def launch_spec(self, state_dir: str | Path | None = None, preview: list[str] | None = None) -> LaunchSpec:
        sd = resolve_state_dir(state_dir)
        overrides = {"PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "RUST_LOG_STYLE": "never"}
        port = self.spec.prometheus_port or free_port()
        return LaunchSpec(
            argv=self.argv(port),
            env={**os.environ, **overrides},
            env_overrides=overrides,
            log_path=Profile.next_log_path(self, sd),  # type: ignore[arg-type]
            cwd=sd,
        )

    def check_port(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.spec.host, self.spec.port))
            except OSError as exc:
                raise ProfileError(
                    f"[gateway] port: {self.spec.host}:{self.spec.port} is busy or cannot be bound ({exc.strerror or exc})",
                    None,
                    ("[gateway] port",),
                ) from None


@dataclass(frozen=True)
class GatewayWorker:
    url: str
    member: str | None  # the fleet member behind this URL (None: not ours)
    healthy: bool
    status: str  # smg's word: ready, pending, ...
    load: int | None
    worker_id: str = ""


@dataclass(frozen=True)
class GatewayStatus:
    url: str
    state: str  # the run: starting | ready | crashed | stopped | fatal ...
    reachable: bool
    error: str | None = None
    workers: tuple[GatewayWorker, ...] = ()
    pid: int | None = None
    restarts: int = 0
    log_path: str | None = None
    traffic: GatewayRates | None = None  # smg's own counters (None: not read)

    @property
    def healthy_workers(self) -> int:
        return sum(1 for w in self.workers if w.healthy)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "state": self.state,
            "reachable": self.reachable,
            "error": self.error,
            "pid": self.pid,
            "restarts": self.restarts,
            "log_path": self.log_path,
            "healthy_workers": self.healthy_workers,
            "total_workers": len(self.workers),
            "workers": [w.__dict__ for w in self.workers],
            "traffic": self.traffic.to_json() if self.traffic is not None else None,
        }


def parse_workers(body: object, members_by_url: dict[str, str]) -> tuple[GatewayWorker, ...]:
    """smg's ``GET /workers`` -> workers. ValueError if the body is not that shape."""
    if not isinstance(body, dict) or not isinstance(body.get("workers"), list):
        raise ValueError(f"/workers: expected {{'workers': [...]}}, got {str(body)[:80]!r}")
    out = []
    for w in body["workers"]:
        if not isinstance(w, dict) or not isinstance(w.get("url"), str):
            continue
        url = w["url"].rstrip("/")
        load = w.get("load")
        out.append(
            GatewayWorker(
                url=url,
                member=members_by_url.get(url),
                healthy=bool(w.get("is_healthy")),
                status=str(w.get("status") or ("healthy" if w.get("is_healthy") else "unhealthy")),
                load=load if isinstance(load, int) else None,
                worker_id=str(w.get("id") or ""),
            )
        )
    return tuple(out)


class Gateway:
    def __init__(self, fleet: FleetSpec, state_dir: str | Path | None = None, *, supervise: bool = True) -> None:
        from server_control.supervision.supervisor import Supervisor  # noqa: PLC0415 - heavy, gateway case only

        assert fleet.gateway is not None
        self.spec = fleet.gateway
        self.name = f"{fleet.name}-gateway"
        self.state_dir = resolve_state_dir(state_dir)
        self.supervise = supervise
        self.members_by_url: dict[str, str] = {}
        self.sup = Supervisor(GatewayProfile(self.name, self.spec, ()), state_dir=self.state_dir)
        # no keep-alive: an idle connection of ours would hold smg's graceful shutdown
        self._client = httpx.AsyncClient(
            timeout=3.0, trust_env=False, verify=tls.shared(), limits=httpx.Limits(max_keepalive_connections=0)
        )
        self._watch: asyncio.Task[None] | None = None
        self._added: dict[str, float] = {}  # url -> when we asked smg to add it
        self.traffic = TrafficReader(self._client)

    @property
    def url(self) -> str:
        return self.spec.url

    def set_members(self, members_by_url: dict[str, str]) -> None:
        """worker URL -> member name; the workers a launch passes with --worker-urls."""
        self.members_by_url = {u.rstrip("/"): n for u, n in members_by_url.items()}
        self.sup.profile = GatewayProfile(self.name, self.spec, tuple(self.members_by_url))

    def adopt(self) -> RunRecord | None:
        return self.sup.adopt()

    async def start(self) -> None:
        """Adopt a live gateway run, else launch one; then supervise it (if asked)."""
        if self.sup.adopt() is None:
            await self.sup.launch()
        if self.supervise and self._watch is None:
            self._watch = asyncio.create_task(self.sup.watch(), name="gateway-supervise")

    async def launch(self) -> RunRecord:
        return await self.sup.launch()

    async def stop(self) -> StopResult:
        return await self.sup.stop()

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            try:
                await self._watch
            except BaseException:  # noqa: BLE001 - closing anyway
                pass
            self._watch = None
        await self._client.aclose()

    async def wait_ready(self, timeout_s: float) -> str:
        return await self.sup.wait_ready(timeout_s)

    async def read(self, traffic_max_age_s: float = 0.0) -> GatewayStatus:
        """The worker list (read now) and smg's traffic (``/metrics``: the last read while it is
        younger than ``traffic_max_age_s``; gateway_metrics.TrafficReader)."""
        run = self.sup.status()
        state = run.state or OtherState.UNKNOWN
        try:
            resp = await bounded_request(self._client, "GET", self.url + "/workers")
            resp.raise_for_status()
            workers = parse_workers(clean_json(resp.json()), self.members_by_url)
        except (httpx.HTTPError, ValueError) as exc:
            return GatewayStatus(
                self.url,
                state,
                False,
                f"{self.url}/workers: {type(exc).__name__}: {exc}",
                pid=run.pid,
                restarts=run.restarts,
                log_path=run.log_path,
            )
        if state == RunState.STARTING and not self.supervise:
            state = RunState.READY  # nobody here runs the health checks: it answered, it is up
        traffic = await self.traffic.read(self.sup.record, traffic_max_age_s)
        return GatewayStatus(
            self.url, state, True, workers=workers, pid=run.pid, restarts=run.restarts, log_path=run.log_path, traffic=traffic
        )

    async def reconcile(self, status: GatewayStatus | None = None) -> list[str]:
        """Make the gateway's worker list the fleet's: POST /workers for a member it lacks
        (a member launched after the gateway, a fresh tunnel port), DELETE /workers/{id} for
        a URL no member has (a previous console's tunnel). Returns what it did."""
        import time

        status = status or await self.read()
        if not status.reachable:
            return []
        done = []
        have = {w.url: w for w in status.workers}
        now = time.monotonic()
        for url, member in self.members_by_url.items():
            # smg lists a worker only once it registered; until then (it retries a worker that
            # does not answer yet) a second POST answers 409
            if url not in have and now - self._added.get(url, -ADD_RETRY_S) >= ADD_RETRY_S:
                self._added[url] = now
                resp = await bounded_request(self._client, "POST", self.url + "/workers", json={"url": url})
                done.append(f"add {member} {url}: HTTP {resp.status_code}")
        for url, w in have.items():
            if url not in self.members_by_url and w.worker_id:
                resp = await bounded_request(self._client, "DELETE", f"{self.url}/workers/{w.worker_id}")
                done.append(f"remove {url}: HTTP {resp.status_code}")
        return done
