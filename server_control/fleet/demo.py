"""The demo fleet (`specconsole demo --fleet`): the shipped four simulated replicas behind
smg on usable ports, and client traffic sent through the gateway.

    spec = demo_fleet(state_dir)                  # assets/fleets/demo.toml, ports made free
    traffic = GatewayTraffic(gateway_url, model)  # closed-loop clients, a slow wave 1..peak
    traffic.start(); ...; await traffic.stop(); traffic.sent, traffic.errors

Each replica also runs its own built-in traffic (different per replica: a wave, light
steady, heavy steady, a ramp), so the replicas sit on different sides of their thresholds;
the gateway's round robin spreads the client traffic over all of them on top.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from pathlib import Path
from typing import Any

from server_control.fleet.spec import FleetSpec, load_fleet
from server_control.host.ports import free_port
from server_control.net import tls
from server_control.net.http import client_limits
from server_control.net.lean_httpx import httpx
from server_control.state import runs
from server_control.state.state_dir import resolve_state_dir

DEMO_FLEET = "demo"


def _usable_port(host: str, port: int, taken: set[int]) -> int:
    import socket

    if port not in taken:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
                return port
            except OSError:
                pass
    while (port := free_port(host)) in taken:
        pass
    return port


def demo_fleet(state_dir: str | Path | None = None, time_scale: float = 1.0) -> FleetSpec:
    """The shipped demo fleet; a replica keeps the port of its live run (adopted), other
    busy ports (and the gateway's) are replaced by free ones."""
    spec = load_fleet(DEMO_FLEET)
    sd = resolve_state_dir(state_dir)
    taken: set[int] = set()
    members = []
    for m in spec.members:
        prof = m.profile
        assert prof is not None
        rec = runs.load_record(prof.name, sd)
        port = rec.port if rec is not None and rec.is_live() else _usable_port(prof.connect_host, prof.port, taken)
        taken.add(port)
        sim = {**prof.sim, "time_scale": time_scale} if time_scale != 1.0 else prof.sim
        prof = dataclasses.replace(prof, server={**prof.server, "port": port}, sim=sim)
        members.append(dataclasses.replace(m, profile=prof))
    gw = spec.gateway
    if gw is not None:
        rec = runs.load_record(f"{spec.name}-gateway", sd)
        port = rec.port if rec is not None and rec.is_live() else _usable_port(gw.host, gw.port, taken)
        gw = dataclasses.replace(gw, port=port)
    return dataclasses.replace(spec, members=tuple(members), gateway=gw)


class GatewayTraffic:
    """``peak`` closed-loop clients at most, the number active following a cosine wave of
    ``period_s`` between 1 and ``peak``; each sends short completions through the gateway."""

    def __init__(self, url: str, model: str, *, peak: int = 12, period_s: float = 60.0, max_tokens: int = 48) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.peak = peak
        self.period_s = period_s
        self.max_tokens = max_tokens
        self.sent = 0
        self.errors = 0
        self.last_error: str | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._t0 = 0.0

    def active(self, now: float | None = None) -> int:
        t = (now if now is not None else time.monotonic()) - self._t0
        return 1 + round((self.peak - 1) * (1 - math.cos(2 * math.pi * t / self.period_s)) / 2)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._client = httpx.AsyncClient(timeout=60.0, trust_env=False, verify=tls.shared(), limits=client_limits())
        self._tasks = [asyncio.create_task(self._worker(i), name=f"demo-traffic-{i}") for i in range(self.peak)]

    async def _worker(self, i: int) -> None:
        body = {
            "model": self.model,
            "prompt": "Tell me about speculative decoding.",
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
        }
        while True:
            if i >= self.active():
                await asyncio.sleep(0.5)
                continue
            try:
                resp = await self._client.post(self.url + "/v1/completions", json=body)
                if resp.status_code == 200:
                    self.sent += 1
                    continue
                self.last_error = f"HTTP {resp.status_code}: {resp.text[:120]}"
            except httpx.HTTPError as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
            self.errors += 1
            await asyncio.sleep(1.0)  # the gateway or the replicas are not up (yet)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if getattr(self, "_client", None) is not None:
            await self._client.aclose()
