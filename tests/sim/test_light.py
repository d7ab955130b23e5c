"""--sim-light: the TP ranks live in the main process; everything else is unchanged."""

from __future__ import annotations

import httpx

from server_control.protocol import decision


def test_light_ranks_are_one_process_that_logs_for_every_rank(sim_factory):
    sim = sim_factory("--sim-light", tp=2, traffic="steady:8", threshold=3).wait_ready()
    assert sim.group_pids() == [sim.proc.pid]
    assert httpx.get(sim.url + "/sim/stats").json()["rank_pids"] == [sim.proc.pid] * 2
    for rank in ("TP0", "TP1"):
        sim.wait_for_log(f"{rank}] Dynamic speculation disable enabled: threshold=3")
        sim.wait_for_log(f"{rank}] Dynamic speculation: switched to target-only")
    url = sim.url + "/set_internal_state"
    assert httpx.post(url, json={"server_args": {decision.THRESHOLD_KEY: 9}}).json() == [True]
    sim.wait_for_log("Dynamic speculation: threshold changed 3 -> 9", count=2)
    assert httpx.post(url, json={"server_args": {decision.THRESHOLD_KEY: -1}}).json() == [False]
    sim.wait_for_log("Dynamic speculation: refused speculative_disable_batch_threshold=-1")


def test_light_crash_exits_1_with_the_traceback(sim_factory):
    sim = sim_factory("--sim-light", "--sim-crash-after", "2", tp=2, traffic="steady:2").wait_ready()
    assert sim.proc.wait(30) == 1
    log = sim.log_text()
    assert "TP0] Scheduler hit an exception: Traceback" in log and "RuntimeError: CUDA error" in log
