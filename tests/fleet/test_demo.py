"""The demo fleet: shipped replicas on usable ports; the gateway traffic's wave."""

from __future__ import annotations

import socket

from server_control.fleet.demo import GatewayTraffic, _usable_port, demo_fleet
from tests.support.sim import free_port


def test_demo_fleet_takes_usable_distinct_ports(tmp_path):
    spec = demo_fleet(tmp_path, time_scale=5)
    ports = [m.profile.port for m in spec.members]
    assert len(set(ports)) == 4 and spec.gateway.port not in ports
    assert {m.profile.sim["time_scale"] for m in spec.members} == {5}
    assert len({m.profile.sim["traffic"] for m in spec.members}) == 4


def test_a_busy_port_is_replaced_and_a_taken_one_skipped():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert _usable_port("127.0.0.1", port, set()) != port
    free = free_port()
    assert _usable_port("127.0.0.1", free, set()) == free
    assert _usable_port("127.0.0.1", free, {free}) != free


def test_gateway_traffic_follows_a_wave_between_1_and_peak():
    t = GatewayTraffic("http://127.0.0.1:9", "m", peak=12, period_s=60)
    t._t0 = 0.0
    assert [t.active(x) for x in (0, 10, 30, 50, 60)] == [1, 4, 12, 4, 1]
