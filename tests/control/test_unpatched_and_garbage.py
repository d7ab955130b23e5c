"""Control and polling against servers that are not our patched SGLang: stock SGLang
(no runtime threshold), garbage answers, a hanging server, nothing listening."""

from __future__ import annotations

import asyncio
import time

from server_control.control.settings import UNSUPPORTED, Control
from server_control.host.ports import free_port
from server_control.logs import LogPipeline, LogStore
from server_control.protocol.runtime_settings import FORCE, THRESHOLD
from server_control.telemetry.http_poll import HttpPoller


async def test_stock_sglang_says_unsupported_with_its_log_line(stand):
    srv = stand("stock")
    store = LogStore()
    pipeline = LogPipeline(srv.log_path, store)
    task = asyncio.create_task(pipeline.run())
    try:
        control = Control(srv.url, records_since=store.since, log_seq=lambda: store.last_seq)
        result = await control.set_setting(THRESHOLD.key, 8)
        await control.aclose()
    finally:
        pipeline.stop()
        await task
    assert result.state == "unsupported"
    assert result.detail.startswith(UNSUPPORTED)
    assert "Updating speculative_disable_batch_threshold is not supported." in result.detail
    assert list(result.ranks) == [False]


async def test_stock_sglang_without_log_still_unsupported(stand):
    srv = stand("stock")
    control = Control(srv.url)
    result = await control.set_setting(THRESHOLD.key, 3)
    got = await control.get()
    await control.aclose()
    assert result.state == "unsupported" and "no speculative_disable_batch_threshold" in result.detail
    none = {"threshold": [None], "hysteresis": [None], "dwell": [None], "force": [None], "cold": [None]}
    assert got == {"thresholds": [None], "force": [None], "settings": none, "supported": False}


async def test_invalid_values_refused_locally_without_a_server():
    control = Control(f"http://127.0.0.1:{free_port()}")  # nothing listens: never contacted
    for bad, words in [
        (-1, "must be >= 0"),
        ("abc", "must be an integer"),
        (2.5, "must be an integer"),
        (10**9, "absurd"),
        (True, "must be an integer"),
    ]:
        result = await control.set_setting(THRESHOLD.key, bad)
        assert result.state == "refused", bad
        assert words in result.detail, (bad, result)
    result = await control.set_setting(FORCE.key, "sideways")
    assert result.state == "refused" and "auto" in result.detail
    await control.aclose()


async def test_connection_refused_is_error():
    control = Control(f"http://127.0.0.1:{free_port()}")
    result = await control.set_setting(THRESHOLD.key, 4)
    await control.aclose()
    assert result.state == "error" and "connection refused" in result.detail


async def test_poller_stock_sample(stand):
    srv = stand("stock")
    poller = HttpPoller(srv.url)
    s = await poller.poll_once()
    await poller.aclose()
    assert s.reachable and s.error is None
    assert s.supports_runtime_threshold is False and s.threshold is None
    assert (s.load.batch, s.load.source, s.model, s.version) == (3, "loads", "stock-model", "0.5.23")


async def test_poller_garbage_json_is_unreachable_with_reason(stand):
    srv = stand("garbage")
    poller = HttpPoller(srv.url)
    s = await poller.poll_once()
    await poller.aclose()
    assert not s.reachable and "invalid JSON" in s.error and "/server_info" in s.error


async def test_poller_timeout_is_unreachable_with_reason(stand):
    srv = stand("hang")
    poller = HttpPoller(srv.url, timeout_s=0.3)
    s = await poller.poll_once()
    await poller.aclose()
    assert not s.reachable and s.error == f"{srv.url}/server_info: timed out"  # names the URL


async def test_poller_connection_refused_then_recovers(stand, tmp_path):
    port = free_port()
    samples, ended = [], []  # each sample and when it was handed over (monotonic: its poll's end)

    def took(sample):
        samples.append(sample)
        ended.append(time.monotonic())

    poller = HttpPoller(f"http://127.0.0.1:{port}", interval_s=0.1, timeout_s=1.0, on_sample=took)
    task = asyncio.create_task(poller.run())
    try:

        async def until(cond, timeout=30.0):
            deadline = asyncio.get_running_loop().time() + timeout
            while not cond():
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)

        await until(lambda: samples and not samples[-1].reachable)
        assert "connection refused" in samples[-1].error
        srv = stand("stock", port)
        await until(lambda: samples[-1].reachable)
        srv.stop()
        await until(lambda: not samples[-1].reachable)
        stand("stock", port)
        await until(lambda: samples[-1].reachable)
    finally:
        poller.stop()
        await task
    # polls never overlap: each began after the previous one ended (both read on the monotonic
    # clock: a sample's ts is stamped when the answer came, before the rest of its poll, so
    # ts - poll_s could place a start before its real one by that rest, ms on a loaded machine)
    starts = [end - s.poll_s for s, end in zip(samples, ended, strict=True)]
    assert all(starts[i + 1] >= ended[i] - 0.005 for i in range(len(samples) - 1))


async def test_force_mode_falls_back_to_numeric_code_on_422(stand):
    srv = stand("typed")
    control = Control(srv.url)
    forced = await control.set_setting(FORCE.key, "target-only")
    back = await control.set_setting(FORCE.key, "auto")
    n = await control.set_setting(THRESHOLD.key, 9)
    await control.aclose()
    assert forced.state == "applied", forced
    assert back.state == "applied" and n.state == "applied"


async def test_load_falls_back_to_metrics(stand):
    srv = stand("metrics")
    poller = HttpPoller(srv.url)
    s = await poller.poll_once()
    await poller.aclose()
    assert s.reachable and (s.load.source, s.load.batch, s.load.gen_throughput) == ("metrics", 9, 321.5)


async def test_load_falls_back_to_log_records(stand):
    srv = stand("noload")
    store = LogStore()
    pipeline = LogPipeline(srv.log_path, store)
    task = asyncio.create_task(pipeline.run())
    poller = HttpPoller(srv.url, records_fn=lambda: store.tail(100))
    try:
        for _ in range(200):
            if store.filter(kinds=["decode"]):
                break
            await asyncio.sleep(0.05)
        s = await poller.poll_once()
    finally:
        await poller.aclose()
        pipeline.stop()
        await task
    assert s.reachable and s.load.source == "logs"
    assert (s.load.batch, s.load.queue, s.load.gen_throughput, s.load.accept_len) == (4, 1, 77.0, 2.5)


async def test_gate_missing_fails_initialisation_and_runtime_with_causes(stand):
    from server_control.control.verify import CAUSE_NO_INIT, CAUSE_NO_SWITCH
    from server_control.session.session import Session

    srv = stand("nogate")
    session = Session.attach(srv.url, log_path=srv.log_path, poll_interval_s=0.1)
    await session.start()
    try:
        for _ in range(600):
            if session.verification().to_json()["layers"][2]["status"] == "fail":
                break
            await asyncio.sleep(0.05)
        config, init, runtime = session.verification().to_json()["layers"]
    finally:
        await session.close()
    assert config["status"] == "pass"
    assert init["status"] == "fail" and init["cause"] == CAUSE_NO_INIT
    assert "ready to roll" in init["evidence"]
    assert runtime["status"] == "fail" and runtime["cause"] == CAUSE_NO_SWITCH
    assert "batch 9 > threshold 5" in runtime["evidence"]
