"""The load generator (server_control/loadgen.py) against a real simulator process."""

import httpx

from server_control import decision
from server_control import loadgen


def test_crossover_and_suggested_threshold_from_rows():
    per_mode = {decision.SPECULATIVE: [{"concurrency": c, "tok_s": t} for c, t in [(1, 96), (4, 300), (8, 340)]],
                decision.TARGET_ONLY: [{"concurrency": c, "tok_s": t} for c, t in [(1, 74), (4, 290), (8, 530)]]}
    assert loadgen.crossover(per_mode) == 8
    assert loadgen.previous_level([1, 4, 8], 8) == 4
    assert loadgen.crossover({decision.SPECULATIVE: per_mode[decision.SPECULATIVE]}) is None


async def test_run_level_counts_streamed_tokens(sim_factory):
    sim = sim_factory().wait_ready()
    r = await loadgen.run_level(sim.url, 3, warmup_s=0.3, measure_s=1.0, max_tokens=64)
    assert r.errors == 0, r.error_sample
    assert r.tokens > 0 and r.tok_s > 0 and r.ttft_p50_s is not None
    assert await loadgen.set_force(sim.url, decision.TARGET_ONLY)
    assert httpx.get(sim.url + "/server_info").json()["internal_states"][0][decision.FORCE_KEY] == decision.TARGET_ONLY
