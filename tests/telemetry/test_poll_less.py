"""Poll less: while the followed log brings fresh decode lines, one request (/server_info)
serves a poll; idle (no decode lines) the load is asked for, then not again while the
server takes no decode step (re-asked every IDLE_RECHECK polls). A dead server's last log
numbers are never reported as its live load."""

from __future__ import annotations

import asyncio
import time

from server_control.logs import LogPipeline, LogStore, Record
from server_control.telemetry.http_poll import HttpPoller
from server_control.telemetry.sample import fresh_decode_load, record_age_s
from tests.support.sim import start_sim


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def decode(seq: int, batch: int, t: float, rank: str = "TP0") -> Record:
    raw = (
        f"[{_stamp(t)} {rank}] Decode batch, #running-req: {batch}, #token: 10, token usage: 0.01, "
        f"accept len: 2.00, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 50.00, #queue-req: 0, "
    )
    return Record(seq, "decode", raw, seq=seq)


def test_fresh_decode_load_rules():
    now = time.time()
    recs = [decode(1, 3, now - 60), decode(2, 7, now - 0.5)]
    assert fresh_decode_load(recs, 1, now, 3.0).batch == 7  # new since seq 1, stamped now
    assert fresh_decode_load(recs, 2, now, 3.0) is None  # nothing new since the last poll
    assert fresh_decode_load([decode(3, 7, now - 60)], 0, now, 3.0) is None  # new to us, but old
    assert fresh_decode_load([decode(3, 7, now + 3600)], 0, now, 3.0) is None  # another time zone
    # DP 2: a poll is served by the log only when both groups have a fresh line
    dp = [decode(1, 4, now - 30, "DP0 TP0"), decode(2, 5, now - 30, "DP1 TP1"), decode(3, 6, now, "DP0 TP0")]
    assert fresh_decode_load(dp, 2, now, 3.0) is None
    dp.append(decode(4, 2, now, "DP1 TP1"))
    assert fresh_decode_load(dp, 2, now, 3.0).batch == 8
    assert record_age_s("10:00:00", now) is not None and record_age_s("garbage", now) is None


async def _poll(poller, store, n: int) -> list:
    out = []
    for _ in range(n):
        before = poller.requests
        s = await poller.poll_once()
        out.append((poller.requests - before, s.load.source, s.load.batch))
        await asyncio.sleep(0.3)
    return out


async def _follow(sim, store):
    pipeline = LogPipeline(sim.log_path, store)
    task = asyncio.create_task(pipeline.run())
    return pipeline, task


async def test_busy_server_one_request_per_poll_idle_mostly_one(tmp_path):
    with (
        start_sim(tmp_path, "--decode-log-interval", "5", tp=1, traffic="steady:6", time_scale=5) as busy,
        start_sim(tmp_path, tp=1, traffic="idle") as idle,
    ):
        busy.wait_ready(), idle.wait_ready()
        results = {}
        for name, sim in (("busy", busy), ("idle", idle)):
            store = LogStore()
            pipeline, task = await _follow(sim, store)
            poller = HttpPoller(sim.url, records_fn=lambda s=store: s.tail(400))
            try:
                await asyncio.sleep(1.0)
                results[name] = await _poll(poller, store, 8)
            finally:
                await poller.aclose()
                pipeline.stop()
                await task
    busy_polls, idle_polls = results["busy"][1:], results["idle"][1:]  # the first poll primes
    served = [p for p in busy_polls if p[1] == "logs"]
    # a loaded machine may delay the simulator's lines past a poll: that poll asks /v1/loads
    assert len(served) >= len(busy_polls) // 2, results
    assert all(req == 1 and batch in (5, 6) for req, _src, batch in served), results
    assert all(req == 2 for req, src, _batch in busy_polls if src == "loads"), results
    # idle: the load asked once, then /server_info alone while no decode step is taken
    # (before: /server_info + /v1/loads at every poll, 2 requests each)
    assert all(src == "loads" and batch == 0 for _req, src, batch in idle_polls), results
    assert sum(req for req, _src, _batch in idle_polls) <= len(idle_polls) + 2, results
    assert [req for req, _src, _batch in idle_polls].count(1) >= len(idle_polls) - 2, results


def test_an_idle_load_is_asked_again_when_a_decode_step_is_taken():
    from server_control.model.load import Load
    from server_control.telemetry.http_poll import IDLE_RECHECK, decode_steps
    from server_control.telemetry.sample import RankState, Sample

    def sample(steps: int) -> Sample:
        rank = RankState(0, True, 5, 1, 10, "auto", {"steps": {"speculative": steps, "target_only": 0}}, None, None)
        return Sample(ts=0.0, reachable=True, ranks=[rank])

    poller = HttpPoller("http://127.0.0.1:9")
    idle = Load(batch=0, queue=0, source="loads")
    first = sample(40)
    first.load = idle
    poller._remember_idle(first, None)
    assert decode_steps(first) == 40 and poller._still_idle(sample(40)) is idle  # no step: still idle
    assert poller._still_idle(sample(41)) is None  # a step: ask again
    poller._remember_idle(first, None)
    assert [poller._still_idle(sample(40)) is idle for _ in range(IDLE_RECHECK)].count(False) == 1


async def test_dead_server_has_no_load_from_its_old_log(tmp_path):
    """Before: a crashed server's last decode line was shown as live load at every poll."""
    sim = start_sim(tmp_path, "--decode-log-interval", "5", tp=1, traffic="steady:6", time_scale=5)
    store = LogStore()
    pipeline, task = await _follow(sim, store)
    poller = HttpPoller(sim.url, timeout_s=1.0, records_fn=lambda: store.tail(400))
    try:
        sim.wait_ready()
        await asyncio.sleep(1.0)
        await poller.poll_once()
        sim.stop(grace=0.0)
        await asyncio.sleep(0.5)
        await poller.poll_once()  # may still see the last lines: they were fresh
        await asyncio.sleep(0.3)
        later = [await poller.poll_once() for _ in range(3)]
    finally:
        await poller.aclose()
        pipeline.stop()
        await task
    assert store.filter(kinds=["decode"]), "the log had decode lines"
    assert all(not s.reachable and s.load.batch is None and s.load.source is None for s in later), later
    assert sim.url in later[-1].error, later[-1].error
