"""`fleet launch --wait` waits for the gateway to route to every member launched, shown with
a member that becomes routable only after the gateway is up: real simulators, the real smg,
and a forwarder in front of member b that opens its port once the test has seen the gateway
route to a alone (smg lists members it could reach at once already when it becomes ready,
so a fleet of members that are all up cannot show the waiting)."""

from __future__ import annotations

import asyncio
import time

from server_control.fleet.fleet import GATEWAY, Fleet
from server_control.fleet.spec import parse_fleet
from server_control.model.vocabulary import MemberOutcome
from tests.fleet.conftest import write_profile
from tests.support.sim import free_port

LIFETIME_S = 120


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


class LateForwarder:
    """127.0.0.1:``port`` -> 127.0.0.1:``to``, listening only from ``open()`` on."""

    def __init__(self, port: int, to: int) -> None:
        self.port, self.to = port, to
        self.server: asyncio.Server | None = None
        self.opened_at: float | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def _serve(self, reader, writer) -> None:
        try:
            up_r, up_w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.to), 5)
        except (OSError, TimeoutError):
            writer.close()
            return
        for a, b in ((reader, up_w), (up_r, writer)):
            task = asyncio.create_task(_pipe(a, b))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.opened_at = time.monotonic()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def test_launch_wait_waits_until_a_late_member_is_routed(tmp_path):
    b_port, forward_port = free_port(), free_port()
    spec = parse_fleet(
        {
            "name": "late",
            "poll_interval_s": 0.25,
            "gateway": {"port": free_port(), "health_check_interval_s": 1, "stop_grace_s": 4},
            "members": {
                "a": {"profile": str(write_profile(tmp_path, "la", lifetime=LIFETIME_S))},
                "b": {
                    "profile": str(write_profile(tmp_path, "lb", port=b_port, lifetime=LIFETIME_S)),
                    "worker_url": f"http://127.0.0.1:{forward_port}",  # the gateway reaches b only through it
                },
            },
        },
        tmp_path / "late.toml",
        "late",
    )
    forwarder = LateForwarder(forward_port, b_port)
    fleet = Fleet(spec, tmp_path / "state")
    await fleet.start()
    seen: list[tuple[str, ...]] = []

    async def open_once_a_alone_is_routed() -> None:
        """Watch the gateway while launch --wait runs; open b's way in once smg routes to a only."""
        while True:
            st = fleet.gateway_status
            healthy = tuple(sorted(w.member or "?" for w in st.workers if w.healthy)) if st and st.reachable else ()
            if healthy:
                seen.append(healthy)
            if healthy == ("a",) and len(seen) >= 3:  # a while: the launch has not returned meanwhile
                await forwarder.open()
                return
            await asyncio.sleep(0.25)

    opener = asyncio.create_task(open_once_a_alone_is_routed())
    try:
        results = await asyncio.wait_for(fleet.act("launch", wait_s=90), 150)
        returned_at = time.monotonic()
        gw = next(r for r in results if r.member == GATEWAY)
        assert [r.outcome for r in results] == [MemberOutcome.OK, MemberOutcome.OK, MemberOutcome.OK], results
        assert gw.detail.endswith("routes to 2 of 2 members"), gw.detail
        assert ("a",) in seen, f"the gateway routed to a alone while the launch waited: {seen}"
        assert forwarder.opened_at is not None and returned_at > forwarder.opened_at, "it returned only after b was routable"
        final = fleet.gateway_status
        assert final is not None and sorted(w.member for w in final.workers if w.healthy) == ["a", "b"]
    finally:
        opener.cancel()
        await asyncio.gather(opener, return_exceptions=True)
        await fleet.act("stop")
        await fleet.close()
        await forwarder.close()
