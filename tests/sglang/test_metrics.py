"""The patch's metrics next to SGLang's own: SGLang's real SchedulerMetricsCollector (the
one --enable-metrics creates on each scheduler rank) also registers the spec_disable
gauges and counters with its labels, and they follow the switch at SGLang's publish
points (log_stats) and at each switch."""

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from prometheus_client import REGISTRY, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from server_control.protocol import spec_metrics  # noqa: E402
from server_control.sglang_patch import current_rank  # noqa: E402
from tests.sglang.objects import Recorder, decode_batch, started_worker  # noqa: E402

LABELS = {"model_name": "tiny", "engine_type": "unified", "tp_rank": 0, "pp_rank": 0, "moe_ep_rank": 0}


def scrape() -> dict:
    """(name, frozen labels) -> value for every spec_disable sample in the registry."""
    out = {}
    for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
        for s in family.samples:
            if s.name.startswith(spec_metrics.PREFIX) and not s.name.endswith("_created"):
                extra = {k: v for k, v in s.labels.items() if k not in LABELS}
                out[(s.name, tuple(sorted(extra.items())))] = s.value
    return out


def test_collector_publishes_the_switch(publish):
    from sglang.srt.observability.metrics_collector import SchedulerMetricsCollector, SchedulerStats

    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0)
    worker = started_worker(server_args, Recorder())
    current_rank.set_current(worker._dynspec)  # as the patched __init__ does in a server
    collector = SchedulerMetricsCollector(labels=LABELS, server_args=server_args)
    got = scrape()
    assert got[("sglang:spec_disable_batch_threshold", ())] == 4
    assert got[("sglang:spec_disable_active", ())] == 1
    assert got[("sglang:spec_disable_mode", ())] == 0
    for bs, accepted in ((2, [3, 3]), (6, [0] * 6), (6, [0] * 6)):
        worker.forward_batch_generation(decode_batch(bs))  # the switch publishes by itself
        worker.on_verify_complete_cpu(accepted, batch_size=bs)
    got = scrape()
    assert got[("sglang:spec_disable_mode", ())] == 1  # target-only, published at the switch
    assert got[("sglang:spec_disable_switches_total", (("to", "target_only"),))] == 1
    collector.log_stats(SchedulerStats())  # SGLang's periodic publish point
    got = scrape()
    assert got[("sglang:spec_disable_decode_steps_total", (("mode", "speculative"),))] == 1
    assert got[("sglang:spec_disable_decode_steps_total", (("mode", "target_only"),))] == 2
    assert got[("sglang:spec_disable_generated_tokens_total", (("mode", "speculative"),))] == 8
    assert got[("sglang:spec_disable_generated_tokens_total", (("mode", "target_only"),))] == 12
    assert got[("sglang:spec_disable_last_decode_batch", ())] == 6
    # acceptance over the speculative step only: 3 of 3 drafts accepted -> 4 tokens a verify
    assert got[("sglang:spec_disable_accept_length", ())] == 4.0
    assert got[("sglang:spec_disable_accepted_drafts_total", ())] == 6
    assert got[("sglang:spec_disable_proposed_drafts_total", ())] == 6
    # graphs off (no GPU here): every target forward and draft-extend ran eager, per mode
    for part in ("target_eager", "draft_extend_eager"):
        name = f"sglang:spec_disable_{part}_forwards_total"
        assert got[(name, (("mode", "speculative"),))] == 1
        assert got[(name, (("mode", "target_only"),))] == 2
    graph = {
        "sglang:spec_disable_target_graph_forwards_total",
        "sglang:spec_disable_draft_extend_graph_forwards_total",
    }  # no replay: no series
    # the cost curves: tokens per mode and batch bucket; a step is timed when the next begins
    assert got[("sglang:spec_disable_bucket_tokens_total", (("batch", "2"), ("mode", "speculative")))] == 8
    assert got[("sglang:spec_disable_bucket_tokens_total", (("batch", "6"), ("mode", "target_only")))] == 12
    assert got[("sglang:spec_disable_bucket_steps_total", (("batch", "2"), ("mode", "speculative")))] == 1
    assert got[("sglang:spec_disable_bucket_steps_total", (("batch", "6"), ("mode", "target_only")))] == 1
    assert got[("sglang:spec_disable_bucket_seconds_total", (("batch", "2"), ("mode", "speculative")))] > 0
    assert got[("sglang:spec_disable_cold_draft_above", ())] == 0  # the draft kept warm
    cold = {"sglang:spec_disable_cold_steps_total"}  # no cold step (the mark at 0): no series
    assert set(n for n, _ in got) == set(spec_metrics.NAMES) - graph - cold
