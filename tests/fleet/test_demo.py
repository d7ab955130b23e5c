"""The demo fleet: shipped replicas on usable ports; the gateway traffic's wave."""
from __future__ import annotations

import socket

from server_control.fleet.demo import GatewayTraffic, demo_fleet


def test_demo_fleet_moves_busy_ports_and_keeps_free_ones(tmp_path):
    first = demo_fleet(tmp_path)
    ports = [m.profile.port for m in first.members]
    assert len(set(ports)) == 4 and first.gateway.port not in ports
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[0]))
        busy.listen()
        moved = demo_fleet(tmp_path, time_scale=5)
    assert moved.members[0].profile.port != ports[0]
    assert [m.profile.port for m in moved.members][1:] == ports[1:]
    assert {m.profile.sim["time_scale"] for m in moved.members} == {5}
    assert len({m.profile.sim["traffic"] for m in moved.members}) == 4


def test_gateway_traffic_follows_a_wave_between_1_and_peak():
    t = GatewayTraffic("http://127.0.0.1:9", "m", peak=12, period_s=60)
    t._t0 = 0.0
    assert [t.active(x) for x in (0, 10, 30, 50, 60)] == [1, 4, 12, 4, 1]
