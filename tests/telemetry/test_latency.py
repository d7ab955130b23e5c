"""Latency windows from /metrics histograms (issue 35 item 4): the quantile math against
hand-computed values, windows from deltas, a restart, the stall flag; then the real
simulator's histograms read by the real poller over loopback HTTP."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import httpx
import pytest

from server_control.model.latency import LatencyStatus, compact, line
from server_control.protocol import cost_curves as cc
from server_control.telemetry.http_poll import HttpPoller
from server_control.telemetry.latency import NO_HISTOGRAMS, LatencyWindows, mode_totals, quantile, read_histograms

INF = math.inf
TEXT = """# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_bucket{le="0.01",model_name="m",tp_rank="0"} 10.0
sglang:inter_token_latency_seconds_bucket{le="0.02",model_name="m",tp_rank="0"} 90.0
sglang:inter_token_latency_seconds_bucket{le="+Inf",model_name="m",tp_rank="0"} 100.0
sglang:inter_token_latency_seconds_count{model_name="m",tp_rank="0"} 100.0
sglang:time_to_first_token_seconds_bucket{is_streaming="true",le="0.1",model_name="m"} 3.0
sglang:time_to_first_token_seconds_bucket{is_streaming="true",le="+Inf",model_name="m"} 4.0
sglang:time_to_first_token_seconds_bucket{is_streaming="false",le="0.1",model_name="m"} 1.0
sglang:time_to_first_token_seconds_bucket{is_streaming="false",le="+Inf",model_name="m"} 1.0
sglang:time_to_first_token_seconds_bucket{le="0.1" this line is broken
sglang:num_running_reqs{model_name="m"} 4.0
"""


def test_histograms_are_summed_over_label_sets_and_a_broken_line_is_skipped():
    h = read_histograms(TEXT)
    assert h["itl"] == ((0.01, 10.0), (0.02, 90.0), (INF, 100.0))
    assert h["ttft"] == ((0.1, 4.0), (INF, 5.0))  # streaming and not, together
    assert "e2e" not in h and read_histograms("sglang:num_running_reqs 3\n") == {}


def test_quantiles_as_prometheus_histogram_quantile():
    b = ((0.01, 10.0), (0.02, 90.0), (INF, 100.0))
    assert quantile(0.05, b) == 0.005  # in the first bucket: from 0
    assert abs(quantile(0.5, b) - 0.015) < 1e-12  # rank 50: (50-10)/(90-10) of 0.01..0.02
    assert quantile(0.95, b) == 0.02  # in +Inf: the last finite bound
    assert quantile(0.5, ((0.1, 0.0), (INF, 0.0))) is None and quantile(0.5, ()) is None


def test_windows_are_deltas_and_a_restart_starts_them_again():
    w = LatencyWindows(windows_s=(5.0, 60.0))
    assert not w.status(0).available
    w.add(100.0, {"itl": ((0.01, 0.0), (0.02, 0.0), (INF, 0.0))})
    w.add(103.0, {"itl": ((0.01, 100.0), (0.02, 100.0), (INF, 100.0))})  # 100 fast tokens
    w.add(110.0, {"itl": ((0.01, 100.0), (0.02, 200.0), (INF, 200.0))})  # then 100 slower ones
    st = w.status(110.0)
    five, sixty = st.window(5.0), st.window(60.0)
    assert five.span_s == 7.0 and five.get("itl").count == 100 and five.get("itl").p50 > 0.01  # only the slow ones
    assert sixty.span_s == 10.0 and sixty.get("itl").count == 200 and abs(sixty.get("itl").p50 - 0.01) < 1e-9
    w.add(111.0, {"itl": ((0.01, 1.0), (0.02, 1.0), (INF, 1.0))})  # counters went down: a restart
    assert w.status(111.0).window(60.0).get("itl").count == 1  # since it started, not a negative delta
    assert LatencyStatus.from_json(st.to_json()) == st  # `status --json` and back (a remote member)


def test_no_histograms_says_how_to_get_them():
    w = LatencyWindows()
    w.add(1.0, {})
    st = w.status(1.0)
    assert not st.available and st.reason == NO_HISTOGRAMS and "--enable-metrics" in line(st)


def test_the_stall_flag_needs_a_history_a_queue_and_a_collapse():
    w = LatencyWindows()
    for t in range(20):
        w.watch_decode(float(t), 400.0, 0)
    w.watch_decode(20.0, 50.0, 0)
    assert w.stall is None  # slow, but nothing waits: the load went down
    w.watch_decode(21.0, 50.0, 6)
    assert w.stall is not None and "6 waiting" in w.stall
    w.watch_decode(22.0, 390.0, 6)
    assert w.stall is None


def _poll(url: str, n: int, until: Callable[[LatencyStatus], bool] | None = None) -> LatencyStatus:
    """``n`` polls 0.5 s apart; with ``until``, up to ``n`` polls, stopping at the first
    status it accepts (what a simulator shows in a few seconds of its time takes longer
    in wall seconds when the machine is loaded)."""

    async def go():
        poller = HttpPoller(url)
        try:
            st = None
            for _ in range(n):
                st = (await poller.poll_once()).latency
                poller._latency_next = 0.0  # read /metrics at every poll here
                if until is not None and until(st):
                    return st
                await asyncio.sleep(0.5)
            return st
        finally:
            await poller.aclose()

    return asyncio.run(go())


def test_the_simulators_histograms_through_the_poller(sim_factory):
    sim = sim_factory("--enable-metrics", traffic="phases:s=10000,c=4-4,period=60")
    sim.wait_ready()
    text = httpx.get(sim.url + "/metrics", timeout=5).text
    assert {"ttft", "itl", "e2e", "queue"} <= set(read_histograms(text)), text[:500]  # SGLang's four names
    st = _poll(sim.url, 4)
    assert st.available, st
    w = st.window(60.0)
    assert w.span_s > 1 and w.get("itl").count > 0 and w.get("ttft").count > 0, w
    assert 0 < w.get("itl").p50 <= w.get("itl").p95 <= w.get("itl").p99
    assert "ITL " in compact(st, 60.0) and "(p50/p95," in compact(st, 60.0)


def _dynamic(steps):
    """A rank's dynamic_speculation with cost curves of ``steps``: (mode, batch, step s, tokens)."""
    c, t = cc.CostCounters(), 0.0
    for mode, batch, dt, tokens in steps:
        c.step(mode, batch, t)
        t += dt
        c.commit(mode, batch, tokens)
    c.step("target_only", 1, t)  # the last step's time ends at the next one
    return {cc.SNAPSHOT_KEY: c.snapshot()}


def test_itl_by_mode_is_each_modes_request_seconds_over_its_tokens():
    """Speculative steps of batch 4 taking 90 ms and committing 12 tokens: each request
    waits 90 ms for 3 tokens, 30 ms a token; target-only of batch 4, 40 ms, 4 tokens: 40 ms."""
    spec = [("speculative", 4, 0.090, 12)] * 20
    target = [("target_only", 4, 0.040, 4)] * 20
    first = mode_totals(_dynamic(spec[:10]))
    later = mode_totals(_dynamic(spec + target))
    assert set(first) == {"speculative"} and mode_totals({}) is None and mode_totals({cc.SNAPSHOT_KEY: "x"}) is None
    lw = LatencyWindows()
    lw.add(100.0, read_histograms(TEXT))
    lw.add_modes(100.0, first)
    # one reading (a headless `status` polls once): since the server started, not nothing
    assert dict(lw.status(100.0).window(15.0).itl_by_mode) == pytest.approx({"speculative": 0.030})
    lw.add(110.0, read_histograms(TEXT))
    lw.add_modes(110.0, later)
    w = lw.status(110.0).window(15.0)
    got = dict(w.itl_by_mode)
    assert math.isclose(got["speculative"], 0.030, rel_tol=1e-6) and math.isclose(got["target_only"], 0.040, rel_tol=1e-6)
    assert w.to_json()["itl_mean_by_mode"] == {"speculative": 0.03, "target_only": 0.04}
    assert compact(lw.status(110.0), 15.0).endswith("· ITL mean speculative 30 ms / target-only 40 ms")
    # a restart (totals went down) starts them again: since that restart
    lw.add_modes(120.0, first)
    assert dict(lw.itl_by_mode(15.0)) == pytest.approx({"speculative": 0.030})


def test_the_simulators_itl_by_mode_through_the_poller(sim_factory):
    """The demo's server switches (N=5 under a wave of 1-12): both modes' mean ITL."""
    sim = sim_factory("--enable-metrics", threshold=5, traffic="phases:s=10000,c=1-12,period=4", time_scale=5)
    sim.wait_ready()
    both = {"speculative", "target_only"}
    # both modes within 60 polls (30 s): a fixed 8 once ended before a loaded machine's
    # simulator had dipped to N (the 60 s window then held target-only steps only)
    st = _poll(sim.url, 60, until=lambda st: set(dict(st.window(60.0).itl_by_mode)) == both)
    modes = dict(st.window(60.0).itl_by_mode)
    assert set(modes) == both, st
    assert all(0 < v < 1 for v in modes.values()), modes


def test_a_server_without_metrics_is_said_once_and_not_read_at_every_poll(sim_factory):
    sim = sim_factory()  # no --enable-metrics: /metrics is 404, as SGLang's
    sim.wait_ready()
    st = _poll(sim.url, 2)
    assert not st.available and st.reason == NO_HISTOGRAMS
