"""A fleet at run time: its members' sessions, the gateway, and fleet-wide actions.

    fleet = Fleet(load_fleet(path), state_dir=None, supervise=True)
    await fleet.start()                     # sessions of every member; adopt the gateway
    fleet.rows() -> tuple[MemberRow, ...]   # one per member, in file order
    fleet.gateway_status                    # GatewayStatus or None
    results = await fleet.act("threshold", 8, names=None)   # every member at once
    await fleet.close()                     # servers keep running unless stop_all()

Actions run on all (or the named) members concurrently; each gives a ``MemberResult``
and ``member.exit_code(results)`` aggregates them (0 ok, 1 any failure, 3 any pending).
The gateway, when the file has one, is launched by ``launch`` (after the members) and
stopped by ``stop`` (before them); while the fleet runs, its worker list is read every
poll and kept equal to the members' worker URLs (``Gateway.reconcile``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from server_control.fleet.gateway import Gateway, GatewayStatus
from server_control.fleet.gateway_metrics import METRICS_EVERY_S
from server_control.fleet.member import Member, MemberResult, MemberRow, SupervisorsFor
from server_control.fleet.spec import FleetSpec
from server_control.model.vocabulary import MemberOutcome, RunState
from server_control.session.subscribers import Subscribers

log = logging.getLogger(__name__)
GATEWAY = "gateway"
ROUTED_POLL_S = 0.5  # launch --wait: how often the gateway's worker list is read


class Fleet:
    def __init__(
        self,
        spec: FleetSpec,
        state_dir: str | Path | None = None,
        *,
        supervise: bool = True,
        supervisors: SupervisorsFor | None = None,
    ) -> None:
        """``supervisors``: each local member's own detached supervisors (a console's:
        member.py); without them a ``supervise`` fleet supervises its members in this process."""
        self.spec = spec
        self.state_dir = state_dir
        self.supervise = supervise
        self.members: dict[str, Member] = {
            m.name: Member.build(m, spec, state_dir, supervise=supervise, supervisors=supervisors) for m in spec.members
        }
        self.gateway = Gateway(spec, state_dir, supervise=supervise) if spec.gateway else None
        self.gateway_status: GatewayStatus | None = None
        self._subs = Subscribers(log)
        self._tasks: list[asyncio.Task[Any]] = []
        self._unsubs: list[Callable[[], None]] = []

    # -- life cycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.gather(*(m.start() for m in self.members.values()))
        for m in self.members.values():
            self._unsubs.append(m.session.subscribe(self._forwarder(m.name)))
        if self.gateway is not None:
            self.gateway.set_members(self._worker_urls())
            self.gateway.adopt()
            if self.supervise:  # crash restart of the gateway, as for a local member
                self._tasks.append(asyncio.create_task(self.gateway.sup.watch(), name="gateway-supervise"))
            self._tasks.append(asyncio.create_task(self._watch_gateway(), name="fleet-gateway"))

    async def close(self) -> None:
        for unsub in self._unsubs:
            unsub()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except BaseException:  # noqa: BLE001 - closing anyway
                pass
        self._tasks.clear()
        if self.gateway is not None:
            await self.gateway.close()
        await asyncio.gather(*(m.close() for m in self.members.values()))

    def _worker_urls(self) -> dict[str, str]:
        return {m.worker_url: m.name for m in self.members.values() if m.spec.gateway}

    async def _watch_gateway(self) -> None:
        assert self.gateway is not None
        while True:
            try:
                await self.read_gateway(reconcile=True, traffic_max_age_s=METRICS_EVERY_S)
            except Exception:  # noqa: BLE001 - the next round tries again
                log.exception("reading the gateway failed")
            await asyncio.sleep(self.spec.poll_interval_s)

    async def read_gateway(self, reconcile: bool = False, traffic_max_age_s: float = 0.0) -> GatewayStatus | None:
        """The gateway's status now; its traffic figures may be up to ``traffic_max_age_s`` old
        (the watch's: smg's ``/metrics`` is read every METRICS_EVERY_S, not every poll)."""
        if self.gateway is None:
            return None
        self.gateway.set_members(self._worker_urls())
        status = await self.gateway.read(traffic_max_age_s)
        if reconcile and status.reachable and await self.gateway.reconcile(status):
            status = await self.gateway.read(traffic_max_age_s)
        self.gateway_status = status
        self._publish(GATEWAY)
        return status

    # -- subscribers ----------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """``callback(topic)``: "member:NAME" (its session changed) or "gateway"."""
        return self._subs.subscribe(callback)

    def _publish(self, topic: str) -> None:
        self._subs.publish(topic)

    # -- reading --------------------------------------------------------------------------------
    def _forwarder(self, name: str) -> Callable[[str], None]:
        """A member's session events, published as ``member:<name>``."""

        def forward(_topic: str) -> None:
            self._publish(f"member:{name}")

        return forward

    def rows(self) -> tuple[MemberRow, ...]:
        return tuple(m.row() for m in self.members.values())

    def select(self, names: Iterable[str] | None = None) -> list[Member]:
        names = list(names or [])
        if not names:
            return list(self.members.values())
        unknown = [n for n in names if n not in self.members]
        if unknown:
            raise KeyError(
                f"no member {', '.join(map(repr, unknown))} in fleet {self.spec.name} (members: {', '.join(self.members)})"
            )
        return [self.members[n] for n in names]

    async def settle(self, timeout_s: float = 5.0) -> None:
        await asyncio.gather(*(m.settle(timeout_s) for m in self.members.values()))

    # -- actions --------------------------------------------------------------------------------
    async def act(
        self, action: str, value: object = None, names: Iterable[str] | None = None, *, wait_s: float | None = None
    ) -> tuple[MemberResult, ...]:
        """Run ``action`` on every selected member at once; one result each, in file order.
        ``launch`` launches the gateway after the members, ``stop`` stops it first."""
        names = list(names or [])
        members = self.select(names)
        if action == "stop" and not names and self.gateway is not None:
            gw = await self._gateway_action("stop")
        results = list(await asyncio.gather(*(m.act(action, value, wait_s=wait_s) for m in members)))
        if action == "stop" and not names and self.gateway is not None:
            results.append(gw)
        if action == "launch" and not names and self.gateway is not None:
            launched = [r.member for r in results if r.outcome == MemberOutcome.OK]
            gw = await self._gateway_action("launch", wait_s, launched)
            if gw.outcome != MemberOutcome.OK and launched:  # not rolled back: said, with the way out
                gw = dataclasses.replace(
                    gw,
                    detail=f"{gw.detail}; the members launched ({', '.join(launched)}) "
                    "are left running without the gateway (`specconsole fleet stop` stops them)",
                )
            results.append(gw)
        return tuple(results)

    async def _wait_routed(self, deadline: float, launched: set[str]) -> tuple[int, int]:
        """Until the gateway lists every member launched behind it as a healthy worker, or
        ``deadline`` (monotonic): (members routed to, members launched behind the gateway)."""
        wanted = set(self._worker_urls().values()) & launched
        routed: set[str] = set()
        while True:
            status = await self.read_gateway(reconcile=True, traffic_max_age_s=METRICS_EVERY_S)
            if status is not None:
                routed = {w.member for w in status.workers if w.healthy and w.member in wanted}
            if routed >= wanted or time.monotonic() >= deadline:
                return len(routed), len(wanted)
            await asyncio.sleep(min(ROUTED_POLL_S, max(0.0, deadline - time.monotonic())))

    async def _gateway_action(self, action: str, wait_s: float | None = None, launched: Iterable[str] = ()) -> MemberResult:
        gw = self.gateway
        assert gw is not None
        gw.set_members(self._worker_urls())
        try:
            if action == "stop":
                res = await gw.stop()
                return MemberResult(
                    GATEWAY, action, MemberOutcome.OK if res.ok else MemberOutcome.FAILED, res.message, res.to_dict()
                )
            adopted = gw.adopt()
            if adopted is not None:
                return MemberResult(GATEWAY, action, MemberOutcome.OK, f"already running (pid {adopted.pid})")
            rec = await gw.launch()
            if wait_s:
                deadline = time.monotonic() + wait_s
                state = await gw.wait_ready(wait_s)
                if state != RunState.READY:
                    return MemberResult(GATEWAY, action, MemberOutcome.FAILED, f"gateway {state}: {gw.sup.last_error}")
                routed, wanted = await self._wait_routed(deadline, set(launched))
                if routed < wanted:
                    return MemberResult(
                        GATEWAY,
                        action,
                        MemberOutcome.FAILED,
                        f"launched pid {rec.pid} on {gw.url}; routes to "
                        f"{routed} of {wanted} members after {wait_s:.0f} s (smg adds workers "
                        "asynchronously; `fleet status` shows them)",
                    )
                return MemberResult(
                    GATEWAY,
                    action,
                    MemberOutcome.OK,
                    f"launched pid {rec.pid} on {gw.url}; routes to {routed} of {wanted} members",
                )
            return MemberResult(
                GATEWAY,
                action,
                MemberOutcome.OK,
                f"launched pid {rec.pid} on {gw.url} (not waited for: smg adds its workers asynchronously)",
            )
        except Exception as exc:  # noqa: BLE001 - reported like any member's trouble
            return MemberResult(GATEWAY, action, MemberOutcome.FAILED, f"{type(exc).__name__}: {exc}")
