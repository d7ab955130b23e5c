"""The throughput model against the seed's calibration (pure functions)."""

import random

import pytest

from server_control.protocol.sim_flags import Traffic
from server_control.sim import model
from server_control.sim.traffic import default_peak, target_concurrency


def test_eagle3_single_stream_is_about_96_tok_s():
    assert model.throughput(model.SPECULATIVE, 1) == pytest.approx(96.0, rel=0.02)


def test_plain_decode_saturates_near_773_tok_s():
    assert model.throughput(model.PLAIN, 4096) == pytest.approx(773.0, rel=0.01)
    assert model.throughput(model.PLAIN, 256) == pytest.approx(773.0, rel=0.02)


def test_eagle3_saturates_near_354_tok_s():
    assert model.throughput(model.SPECULATIVE, 4096) == pytest.approx(354.0, rel=0.01)


def test_crossover_is_near_batch_4_to_5():
    assert model.crossover(other=model.TARGET_ONLY) in (4, 5, 6)
    assert model.crossover(other=model.PLAIN) in (4, 5)
    assert model.throughput(model.SPECULATIVE, 2) > model.throughput(model.TARGET_ONLY, 2)
    assert model.throughput(model.TARGET_ONLY, 16) > model.throughput(model.SPECULATIVE, 16)


def test_target_only_costs_the_plain_step_plus_draft_extend_overhead():
    for b in (1, 8, 64):
        assert model.step_ms(model.TARGET_ONLY, b) == pytest.approx(model.step_ms(model.PLAIN, b) * 1.05)
    assert model.mean_accept_length(model.TARGET_ONLY) == 1.0


def test_step_time_grows_with_batch_and_is_zero_without_one():
    for mode in model.STEP_MODES:
        times = [model.step_ms(mode, b) for b in range(1, 300)]
        assert all(a < b for a, b in zip(times, times[1:]))
        assert model.step_ms(mode, 0) == 0.0


def test_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="turbo"):
        model.step_ms("turbo", 4)


def test_sampled_accept_length_matches_the_calibration():
    p = model.accept_probability()
    assert model.expected_accept(p, 3) == pytest.approx(2.85, abs=1e-6)
    rng = random.Random(1)
    samples = [model.sample_accept(rng, p, 3) for _ in range(40000)]
    assert min(samples) == 1 and max(samples) == 4
    assert sum(samples) / len(samples) == pytest.approx(2.85, abs=0.03)


def test_same_seed_same_acceptance_sequence():
    p = model.accept_probability()
    r1, r2 = random.Random(7), random.Random(7)
    assert [model.sample_accept(r1, p, 3) for _ in range(200)] == [model.sample_accept(r2, p, 3) for _ in range(200)]
    r3 = random.Random(8)
    assert [model.sample_accept(r3, p, 3) for _ in range(200)] != [model.sample_accept(r1, p, 3) for _ in range(200)]


def test_accept_rate_and_prefill_cost():
    assert model.accept_rate(2.85, 3) == pytest.approx(0.6167, abs=1e-3)
    assert model.accept_rate(1.0, 3) == 0.0
    assert model.prefill_ms(0) == 0.0
    assert model.prefill_ms(1000) > model.prefill_ms(10) > 0


@pytest.mark.parametrize("kind", ["ramp", "wave"])
def test_built_in_traffic_crosses_the_threshold(kind):
    traffic = Traffic(kind, 0, 60.0)
    values = [target_concurrency(traffic, t / 10, 5) for t in range(600)]
    assert min(values) == 1
    assert max(values) == default_peak(5) == 12
    assert any(v > 5 for v in values) and any(v <= 4 for v in values)


def test_steady_and_idle_traffic():
    assert target_concurrency(Traffic("steady", 7), 123.0, 5) == 7
    assert target_concurrency(Traffic("idle"), 5.0, 5) == 0
