"""Load parsing from /v1/loads, /metrics (real Prometheus parser) and decode records; the
tolerance of /server_info parsing to wrong types."""

from __future__ import annotations

from types import SimpleNamespace as Rec

from server_control.telemetry.sample import (
    load_from_loads,
    load_from_metrics,
    load_from_records,
    sample_from_server_info,
)

LOADS = {
    "timestamp": 1.0,
    "version": "0.5.23",
    "loads": [
        {
            "dp_rank": 0,
            "num_running_reqs": 5,
            "num_waiting_reqs": 1,
            "token_usage": 0.1,
            "gen_throughput": 100.0,
            "speculative": {"accept_length": 2.0, "accept_rate": 0.4},
        },
        {
            "dp_rank": 1,
            "num_running_reqs": 3,
            "num_waiting_reqs": 0,
            "token_usage": 0.3,
            "gen_throughput": 50.0,
            "speculative": {"accept_length": 3.0, "accept_rate": 0.6},
        },
    ],
}


def test_loads_sum_batch_over_dp_ranks():
    load = load_from_loads(LOADS)
    assert (load.batch, load.queue, load.gen_throughput, load.source) == (8, 1, 150.0, "loads")
    assert abs(load.token_usage - 0.2) < 1e-9 and load.accept_len == 2.5 and abs(load.accept_rate - 0.5) < 1e-9


def test_loads_garbage_is_none():
    assert load_from_loads({"loads": "x"}) is None
    assert load_from_loads([1, 2]) is None
    assert load_from_loads({"loads": [{"num_running_reqs": "seven"}]}) is None


METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 7.0
# HELP sglang:num_queue_reqs q
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 2.0
# HELP sglang:gen_throughput t
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="m",tp_rank="0"} 512.5
# HELP sglang:spec_accept_length a
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0"} 2.85
# HELP sglang:prompt_tokens_total p
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 1234.0
"""


def test_metrics_through_prometheus_parser():
    load = load_from_metrics(METRICS)
    assert (load.batch, load.queue, load.gen_throughput, load.accept_len, load.source) == (7, 2, 512.5, 2.85, "metrics")
    assert load.accept_rate is None


def test_metrics_garbage_is_none():
    assert load_from_metrics("<html>not found</html>") is None
    assert load_from_metrics("") is None


def test_records_latest_decode_per_dp_group():
    recs = [
        Rec(
            kind="decode",
            rank="DP0 TP0",
            running_req=9,
            queue_req=0,
            token_usage=0.1,
            gen_throughput=1.0,
            accept_len=None,
            accept_rate=None,
        ),
        Rec(
            kind="decode",
            rank="DP0 TP0",
            running_req=4,
            queue_req=1,
            token_usage=0.2,
            gen_throughput=10.0,
            accept_len=2.0,
            accept_rate=0.5,
        ),
        Rec(kind="other", rank="DP1 TP1"),
        Rec(
            kind="decode",
            rank="DP1 TP1",
            running_req=2,
            queue_req=0,
            token_usage=0.4,
            gen_throughput=20.0,
            accept_len=3.0,
            accept_rate=0.7,
        ),
    ]
    load = load_from_records(recs)
    assert (load.batch, load.queue, load.gen_throughput, load.accept_len, load.source) == (6, 1, 30.0, 2.5, "logs")
    assert load_from_records([Rec(kind="prefill", rank=None)]) is None


def test_server_info_wrong_types_become_none():
    s = sample_from_server_info(
        1.0,
        {
            "tp_size": "two",
            "version": 5,
            "internal_states": [{"speculative_disable_batch_threshold": "5", "dynamic_speculation": "broken"}, 7],
        },
    )
    assert s.tp_size is None and s.version is None
    assert [r.threshold for r in s.ranks] == [None, None]
    assert s.ranks[0].has_threshold_key and not s.ranks[1].has_threshold_key
    assert s.supports_runtime_threshold is False
    assert s.mode is None
