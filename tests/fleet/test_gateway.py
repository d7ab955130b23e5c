"""smg launched, supervised, read and reconciled in front of simulated members."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from server_control.fleet.gateway import Gateway, GatewayProfile, parse_workers
from server_control.fleet.spec import GatewaySpec, parse_fleet
from tests.support.sim import free_port, group_pids, start_sim


def test_gateway_argv_keeps_everything_on_loopback_and_offline():
    prof = GatewayProfile("f-gateway", GatewaySpec(port=31000, stop_grace_s=5), ("http://127.0.0.1:1",))
    argv = prof.argv(29999)
    assert argv[1:4] == ("-m", "smg", "launch")
    assert argv[argv.index("--worker-urls") + 1] == "http://127.0.0.1:1"
    assert argv[argv.index("--prometheus-host") + 1] == "127.0.0.1"  # smg's default is 0.0.0.0:29000
    assert "--disable-tokenizer-autoload" in argv  # else it fetches from the hub
    assert argv[argv.index("--shutdown-grace-period-secs") + 1] == "3"


def test_parse_workers_names_members_and_rejects_garbage():
    body = {
        "workers": [
            {"url": "http://a:1/", "is_healthy": True, "status": "ready", "load": 2, "id": "x"},
            {"url": "http://b:2", "is_healthy": False},
            "junk",
        ]
    }
    a, b = parse_workers(body, {"http://a:1": "m1"})
    assert (a.member, a.healthy, a.status, a.load, a.worker_id) == ("m1", True, "ready", 2, "x")
    assert (b.member, b.healthy, b.status) == (None, False, "unhealthy")
    with pytest.raises(ValueError, match="/workers"):
        parse_workers({"error": "no"}, {})


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    d = tmp_path_factory.mktemp("gw-sims")
    handles = [start_sim(d, "--sim-light", tp=1, lifetime=180) for _ in range(3)]
    try:
        yield [h.wait_ready() for h in handles]
    finally:
        for h in handles:
            h.stop()


async def _until(fn, timeout_s=30.0):
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await fn()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.2)


async def test_gateway_runs_routes_reconciles_and_stops(sims, tmp_path):
    a, b, c = sims
    spec = parse_fleet(
        {"name": "gwt", "gateway": {"port": free_port(), "health_check_interval_s": 1}, "members": {"a": {"url": a.url}}}
    )
    gw = Gateway(spec, tmp_path / "state")
    gw.set_members({a.url: "a", b.url: "b"})
    await gw.start()
    try:
        assert await gw.wait_ready(30) == "ready"
        status = await _until(lambda: _both_ready(gw))
        assert {(w.member, w.healthy) for w in status.workers} == {("a", True), ("b", True)}
        assert status.state == "ready" and status.pid == gw.sup.record.pid
        # traffic through the gateway reaches both members (round robin)
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(4):
                r = await client.post(
                    gw.url + "/v1/completions", json={"model": "sim/Llama-3.1-8B-Instruct", "prompt": "x", "max_tokens": 2}
                )
                assert r.status_code == 200
            bad = await client.post(gw.url + "/v1/completions", json={"model": "nope", "prompt": "x", "max_tokens": 2})
            assert bad.status_code >= 400
        # smg's own counters: 5 requests routed (one of them refused), 1 error, a latency
        traffic = (await gw.read()).traffic
        assert traffic is not None and traffic.error is None, traffic
        assert (traffic.requests_total, traffic.errors_total) == (5, 1)
        assert traffic.req_s > 0 and traffic.err_min > 0 and 0 < traffic.p50_ms < 30_000
        assert "req/s" in traffic.words() and "err/min" in traffic.words()
        for sim in (a, b):
            assert '"POST /v1/completions HTTP/1.1" 200' in sim.log_text()
        # a second console adopts the same gateway run instead of launching another
        other = Gateway(spec, tmp_path / "state", supervise=False)
        assert other.adopt().pid == gw.sup.record.pid
        await other.close()
        # the fleet changed: c joins, a leaves
        gw.set_members({b.url: "b", c.url: "c"})
        done = await gw.reconcile()
        assert any(x.startswith(f"add c {c.url}") for x in done) and any(x.startswith(f"remove {a.url}") for x in done)
        final = await _until(lambda: _has_healthy(gw, "c"))
        assert final is not None and {w.member for w in final.workers if w.healthy} >= {"b", "c"}
        pgid = gw.sup.record.pgid
    finally:
        res = await gw.stop()
        await gw.close()
    assert res.ok and res.message.endswith("by SIGTERM"), res.message
    assert group_pids(pgid) == []


async def _both_ready(gw):
    st = await gw.read()
    return st if st.reachable and len([w for w in st.workers if w.healthy]) == 2 else None


async def _has_healthy(gw, member):
    st = await gw.read()
    return st if any(w.member == member and w.healthy for w in st.workers) else None
