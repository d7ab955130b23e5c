"""smg's own counters read into the gateway's traffic: parsing, rates, the p50, and a clear
"unavailable" when the listener is not there."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from server_control.fleet.gateway_metrics import (
    METRICS_MAX_BYTES,
    GatewaySample,
    TrafficReader,
    TrafficWindow,
    parse_metrics,
    prometheus_url,
    quantile,
)
from tests.support.records import own_record
from tests.support.sim import free_port

# the shape smg 1.13.0 answers (copied from a real gateway's /metrics, label sets trimmed)
SMG_TEXT = """\
# TYPE smg_router_requests_total counter
smg_router_requests_total{router_type="http",model="other",endpoint="completions",streaming="false"} 1
smg_router_requests_total{router_type="http",model="m",endpoint="completions",streaming="false"} 5
# TYPE smg_http_responses_total counter
smg_http_responses_total{path="/health",status_code="200",error_code=""} 5
smg_http_responses_total{path="/workers",status_code="409",error_code=""} 2
smg_http_responses_total{path="/v1/completions",status_code="404",error_code="model_not_found"} 1
smg_http_responses_total{path="/v1/completions",status_code="200",error_code=""} 5
# TYPE smg_router_request_duration_seconds histogram
smg_router_request_duration_seconds_bucket{model="m",endpoint="completions",le="0.005"} 1
smg_router_request_duration_seconds_bucket{model="m",endpoint="completions",le="0.01"} 5
smg_router_request_duration_seconds_bucket{model="m",endpoint="completions",le="+Inf"} 5
smg_router_request_duration_seconds_sum{model="m",endpoint="completions"} 0.034
"""


def test_parse_counts_requests_client_errors_and_the_latency_histogram():
    s = parse_metrics(SMG_TEXT, at=100.0)
    assert (s.requests, s.errors) == (6, 1)  # the 409 to our own POST /workers is not a client error
    assert s.buckets == ((0.005, 1), (0.01, 5), (float("inf"), 5))
    with pytest.raises(ValueError, match="no smg counters"):
        parse_metrics("<html>not metrics</html>", at=1.0)


def test_quantile_interpolates_inside_the_bucket():
    assert quantile(0.5, ((0.005, 1), (0.01, 5), (float("inf"), 5))) == pytest.approx(0.005 + 0.005 * 1.5 / 4)
    assert quantile(0.5, ((0.01, 0), (float("inf"), 0))) is None
    assert quantile(0.5, ((0.01, 0), (float("inf"), 4))) == 0.01  # all in the open bucket


def test_window_rates_since_the_run_start_then_between_samples_and_after_a_reset():
    w = TrafficWindow(started_at=0.0, window_s=60)
    first = w.add(GatewaySample(10.0, requests=20, errors=1, buckets=((0.1, 20), (float("inf"), 20))))
    assert (first.req_s, first.err_min, first.window_s) == (2.0, 6.0, 10.0)
    second = w.add(GatewaySample(20.0, requests=30, errors=1, buckets=((0.1, 30), (float("inf"), 30))))
    assert (second.req_s, second.err_min, second.window_s) == (1.0, 0.0, 10.0)
    assert second.p50_ms == pytest.approx(50.0)  # the 10 new requests, all under 100 ms
    assert "1.0 req/s \u00b7 0 err/min \u00b7 p50 50 ms" in second.words()
    # smg restarted under the same record: counters went down, the window starts again
    again = w.add(GatewaySample(30.0, requests=3))
    assert again.error == "first sample, no rate yet"
    # old samples leave the window
    for t in range(31, 200, 10):
        last = w.add(GatewaySample(float(t), requests=3 + t))
    assert last.window_s <= 70


def _record(argv):
    return own_record(argv=argv)


async def test_unavailable_is_said_with_the_reason(tmp_path):
    async with httpx.AsyncClient(timeout=1.0, trust_env=False) as client:
        reader = TrafficReader(client)
        assert (await reader.read(None)).error == "no gateway run record"
        nothing = await reader.read(_record(["smg", "launch"]))
        assert "names no --prometheus-port" in nothing.error
        port = free_port()  # nobody listens there
        gone = await reader.read(_record(["smg", "--prometheus-host", "127.0.0.1", "--prometheus-port", str(port)]))
        assert gone.error.startswith(f"http://127.0.0.1:{port}/metrics: ConnectError"), gone.error
        assert gone.words().startswith("metrics unavailable (http://127.0.0.1:")


async def test_an_endless_metrics_answer_is_cut_at_the_cap():
    """A listener that streams more than the cap: the read stops there, names it, and returns."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    async def serve():
        loop = asyncio.get_running_loop()
        conn, _ = await loop.sock_accept(srv)
        await loop.sock_recv(conn, 65536)  # the request (unread data would reset the connection)
        await loop.sock_sendall(conn, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        chunk = b"smg_router_requests_total 1\n" * 4096
        try:
            for _ in range(10 * METRICS_MAX_BYTES // len(chunk)):  # bounded: 10x the cap at most
                await loop.sock_sendall(conn, chunk)
        except OSError:
            pass  # the reader hung up at its cap
        finally:
            conn.close()

    srv.setblocking(False)
    task = asyncio.create_task(serve())
    try:
        async with httpx.AsyncClient(timeout=1.0, trust_env=False) as client:
            got = await TrafficReader(client).read(_record(["smg", "--prometheus-port", str(port)]))
        assert "answer too large" in got.error, got.error
    finally:
        task.cancel()
        srv.close()


def test_prometheus_url_from_the_run_argv():
    assert prometheus_url(_record(["x", "--prometheus-host", "127.0.0.1", "--prometheus-port", "29001"])) == (
        "http://127.0.0.1:29001/metrics"
    )
    assert prometheus_url(_record(["x", "--prometheus-port", "nope"])) is None


async def test_metrics_are_read_at_most_every_few_seconds_and_at_once_for_a_new_run():
    """The fleet's watch asks for the traffic every poll; /metrics (tens of KB, parsed line by
    line) is read once per ``max_age_s``, the reads in between answer the last rates; a new
    gateway run is read at once. A real listener on loopback counts the requests."""
    import dataclasses

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    asked: list[bytes] = []
    body = SMG_TEXT.encode()

    async def serve():
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(srv)
            asked.append(await loop.sock_recv(conn, 65536))
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
            await loop.sock_sendall(conn, head % len(body) + body)
            conn.close()

    task = asyncio.create_task(serve())
    try:
        async with httpx.AsyncClient(timeout=1.0, trust_env=False) as client:
            reader = TrafficReader(client)
            record = _record(["smg", "--prometheus-port", str(port)])
            first = await reader.read(record, max_age_s=0.3)
            again = [await reader.read(record, max_age_s=0.3) for _ in range(5)]
            assert len(asked) == 1 and reader.reads == 1
            assert all(r == first for r in again) and first.error is None, first
            await asyncio.sleep(0.35)
            await reader.read(record, max_age_s=0.3)
            assert len(asked) == 2
            restarted = dataclasses.replace(record, pid=record.pid + 1)
            await reader.read(restarted, max_age_s=0.3)
            assert len(asked) == 3  # another run: its own counters, read now
            await reader.read(restarted)
            assert len(asked) == 4  # max_age_s 0 (`fleet status`, a test): read now
    finally:
        task.cancel()
        srv.close()
