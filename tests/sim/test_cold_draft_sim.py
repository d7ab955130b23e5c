"""The simulator's cold draft: above ``cold_draft_above`` a target-only step costs a plain
step (no draft extend) and marks its requests cold; each then accepts no draft for the
calibrated number of speculative steps (``--sim-cold-recovery``). The real Scheduler's
step pieces, then a real simulator process counting its cold steps."""

from __future__ import annotations

import time

import httpx
import pytest

from server_control.protocol import decision
from server_control.sim import model
from server_control.sim.args import parse_args
from server_control.sim.scheduler import Scheduler
from server_control.sim.step_output import produce


def _scheduler(*flags: str) -> Scheduler:
    args, _ = parse_args(["--model-path", "sim/model", "--speculative-algorithm", "EAGLE3", *flags])
    return Scheduler(args, ranks=None, log=None, deliver=lambda waiters: None, on_fatal=lambda code, message: None)


def test_a_cold_target_only_step_costs_a_plain_step():
    for b in (1, 8, 64):
        assert model.step_ms(model.TARGET_ONLY, b, cold=True) == pytest.approx(model.step_ms(model.PLAIN, b))
        assert model.step_ms(model.TARGET_ONLY, b) > model.step_ms(model.TARGET_ONLY, b, cold=True)
        assert model.step_ms(model.SPECULATIVE, b, cold=True) == model.step_ms(model.SPECULATIVE, b)


@pytest.mark.parametrize("recovery", [12, 3, 0])
def test_requests_that_lived_through_a_cold_step_accept_no_draft_while_they_recover(recovery):
    sched = _scheduler("--sim-cold-recovery", str(recovery))
    sched.accept_p = 1.0  # every draft accepted when the draft is warm: 4 tokens a step
    cold, warm = sched.new_request(8, 10_000), sched.new_request(8, 10_000)
    sched.running = [cold, warm]
    produce(sched, [], [cold], model.TARGET_ONLY, cold=True)
    produce(sched, [], [warm], model.TARGET_ONLY, cold=False)
    per_step = []
    for _ in range(recovery + 2):
        before = (cold.generated, warm.generated)
        produce(sched, [], [cold, warm], model.SPECULATIVE)
        per_step.append((cold.generated - before[0], warm.generated - before[1]))
    assert per_step == [(1, 4)] * recovery + [(4, 4)] * 2


def test_the_sim_counts_its_cold_steps_above_the_mark_only(sim_factory):
    # steady:8 above N=4: every decode step of batch 8 runs target-only; cold above 4, warm at mark 8
    cold = sim_factory("--speculative-disable-cold-draft-above", "4", "--enable-metrics", threshold=4, traffic="steady:8")
    warm = sim_factory("--speculative-disable-cold-draft-above", "8", threshold=4, traffic="steady:8")
    cold.wait_ready()
    warm.wait_ready()
    deadline = time.monotonic() + 30
    while True:
        states = [httpx.get(s.url + "/server_info", timeout=5).json()["internal_states"][0] for s in (cold, warm)]
        snaps = [st[decision.STATE_KEY] for st in states]
        if snaps[0]["steps"][decision.TARGET_ONLY] >= 100 and snaps[1]["steps"][decision.TARGET_ONLY] >= 100:
            break
        assert time.monotonic() < deadline, snaps
        time.sleep(0.3)
    c, w = snaps
    assert c["cold_draft_above"] == 4 and w["cold_draft_above"] == 8
    assert w["cold_steps"] == 0
    # every target-only step at batch 8 was cold (a step at batch <= 4 while the load fills is warm)
    assert c["steps"][decision.TARGET_ONLY] - 5 <= c["cold_steps"] <= c["steps"][decision.TARGET_ONLY]
    metrics = httpx.get(cold.url + "/metrics", timeout=5).text
    counted = [
        float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("sglang:spec_disable_cold_steps_total")
    ]
    assert counted and counted[0] >= c["cold_steps"], metrics[-2000:]  # the same counter, read a moment later
    assert "sglang:spec_disable_cold_draft_above" in metrics
