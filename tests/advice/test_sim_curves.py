"""The simulator's moving crossover (context length, acceptance), its phased traffic and
the cost curves it publishes in /server_info and /metrics, over real HTTP."""

import dataclasses

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server_control.protocol import cost_curves
from server_control.protocol.sim_flags import parse_traffic
from server_control.protocol.sim_phases import PhaseError, parse_phases, phase_at
from server_control.sim import model


def test_longer_context_and_higher_acceptance_move_the_crossover_up():
    cal = dataclasses.replace(model.DEFAULT, kv_ms_per_ktoken=0.2)
    a_hi, a_lo = model.expected_accept(0.9, 3), model.expected_accept(0.65, 3)
    short = model.crossover(cal, context=500, accept_length=a_hi)
    long = model.crossover(cal, context=4000, accept_length=a_hi)
    assert short is not None and long is not None and long >= short + 2
    assert model.crossover(cal, context=4000, accept_length=a_lo) < long
    # without a KV cost the context changes nothing (the short-context calibration)
    assert model.crossover(context=8000) == model.crossover() == model.crossover(context=0)
    # the documented formula: target-only wins where T_spec > A * T_target
    b = long
    t_s = model.step_ms(model.SPECULATIVE, b, cal, 4000)
    t_t = model.step_ms(model.TARGET_ONLY, b, cal, 4000)
    assert t_s > a_hi * t_t
    assert model.step_ms(model.SPECULATIVE, b - 1, cal, 4000) <= a_hi * model.step_ms(model.TARGET_ONLY, b - 1, cal, 4000)


def test_phases_parse_cycle_and_wave():
    phases = parse_phases("s=60,c=2-16,ctx=400,p=0.85/s=30,c=8,ctx=6000")
    assert [(p.seconds, p.lo, p.hi, p.ctx, p.accept_p) for p in phases] == [(60, 2, 16, 400, 0.85), (30, 8, 8, 6000, None)]
    assert phase_at(phases, 10)[0] == 0 and phase_at(phases, 70)[0] == 1 and phase_at(phases, 95)[0] == 0
    wave = [phases[0].concurrency(t) for t in range(0, 21)]
    assert min(wave) == 2 and max(wave) == 16 and wave[0] == 2 and wave[10] == 16
    assert parse_traffic("phases:s=5,c=3").phases[0].lo == 3


@pytest.mark.parametrize(
    "text, why",
    [
        ("s=60", "needs s=SECONDS and c="),
        ("s=0,c=2", "s must be > 0"),
        ("s=5,c=9-2", "backwards"),
        ("s=5,c=2,p=1.5", "p must be between"),
        ("s=5,c=2,zz=1", "unknown key 'zz'"),
        ("s=5,c=2,ctx=abc", "ctx='abc' is not a number"),
        ("s=5,c=2,c=3", "c given twice"),
    ],
)
def test_bad_phases_are_refused_naming_the_key(text, why):
    with pytest.raises(PhaseError, match=why):
        parse_phases(text)


def test_the_sim_publishes_cost_curves_matching_its_model(sim_factory):
    # steady 3 requests of ~4000-token prompts, a KV cost: the curves' step time at batch 3
    # is the model's step time at the published mean context (the step clock is exact)
    sim = sim_factory(
        "--enable-metrics", "--sim-kv-cost", "0.2", threshold=5, traffic="phases:s=1000,c=3,ctx=4000", time_scale=20
    )
    sim.wait_ready()
    sim.wait_for_log("Decode batch", count=3)
    (state,) = httpx.get(sim.url + "/server_info", timeout=10).json()["internal_states"]
    curves = cost_curves.parse(state["dynamic_speculation"]["cost_curves"])
    b3 = [b for b in curves.mode("speculative") if b.hi == 3]
    assert b3 and b3[0].steps > 50 and not curves.mode("target_only")
    b = b3[0]
    ctx = b.mean_context
    assert ctx is not None and 3500 < ctx < 5500
    cal = dataclasses.replace(model.DEFAULT, kv_ms_per_ktoken=0.2)
    # steps that also prefill take longer: the mean sits a little above the pure decode step
    assert b.step_s * 1000 == pytest.approx(model.step_ms(model.SPECULATIVE, 3, cal, ctx), rel=0.08)
    assert b.tokens_per_step / 3 == pytest.approx(model.DEFAULT.accept_length, rel=0.1)
    text = httpx.get(sim.url + "/metrics", timeout=10).text
    got = {
        (s.name, s.labels.get("mode"), s.labels.get("batch")): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    steps = got[("sglang:spec_disable_bucket_steps_total", "speculative", "3")]
    secs = got[("sglang:spec_disable_bucket_seconds_total", "speculative", "3")]
    assert steps >= b.steps and secs / steps == pytest.approx(b.step_s, rel=0.05)
    assert got[("sglang:spec_disable_bucket_tokens_total", "speculative", "3")] >= b.tokens
