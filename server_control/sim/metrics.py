"""Prometheus text for /metrics (and /v1/loads?format=prometheus), SGLang's `sglang:` names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from server_control.protocol.spec_metrics import SpecMetrics

if TYPE_CHECKING:
    from server_control.sim.app_view import AppView


prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank")


ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0, 800.0)
QUEUE_BUCKETS = (0.0, 0.001, 0.005, 0.010, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)


class Metrics:
    def __init__(self, state: AppView) -> None:
        self.state = state
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.labels = {"model_name": state.model_name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}

        def g(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=r)

        self.gauges = {
            "num_running_reqs": g("sglang:num_running_reqs", "The number of running requests."),
            "num_queue_reqs": g("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
            "num_used_tokens": g("sglang:num_used_tokens", "The number of used tokens."),
            "token_usage": g("sglang:token_usage", "The token usage."),
            "gen_throughput": g("sglang:gen_throughput", "The generation throughput (token/s)."),
            "spec_accept_length": g("sglang:spec_accept_length", "The average acceptance length of speculative decoding."),
            "spec_accept_rate": g("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding."),
            "spec_num_steps": g("sglang:spec_num_steps", "The number of speculative steps."),
            "is_cuda_graph": g("sglang:is_cuda_graph", "Whether the batch is using CUDA graph."),
        }
        # the patch's own metrics, defined once (server_control/protocol/spec_metrics.py)
        self.spec = SpecMetrics(Gauge, Counter, self.labels, registry=r)
        self.prompt_tokens = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.", LABELS, registry=r)
        self.generation_tokens = Counter("sglang:generation_tokens", "Number of generation tokens processed.", LABELS, registry=r)
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            LABELS,
            registry=r,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40),
        ).labels(**self.labels)
        # SGLang 0.5.23's request latency histograms, its bucket bounds (observability/metrics_collector.py)
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            LABELS,
            registry=r,
            buckets=ITL_BUCKETS,
        ).labels(**self.labels)
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            LABELS,
            registry=r,
            buckets=E2E_BUCKETS,
        ).labels(**self.labels)
        self.queue = Histogram(
            "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", LABELS, registry=r, buckets=QUEUE_BUCKETS
        ).labels(**self.labels)
        self._counted = (0, 0)
        self._latency = {"ttft": self.ttft, "itl": self.itl, "e2e": self.e2e, "queue": self.queue}
        state.scheduler.latency_sink = self.observe_latency

    def observe_latency(self, kind: str, seconds: float, n: int) -> None:
        """The scheduler's thread, as each request's tokens come (every request, the
        simulator's own traffic too, as SGLang counts every request it serves)."""
        hist = self._latency[kind]
        for _ in range(n):
            hist.observe(max(0.0, seconds))

    def _update(self) -> None:
        sched = self.state.scheduler
        s = sched.stats
        snap = sched.snapshot_switch()
        values = {
            "num_running_reqs": s.running,
            "num_queue_reqs": s.waiting,
            "num_used_tokens": s.tokens_in_use,
            "token_usage": s.token_usage,
            "gen_throughput": s.gen_throughput,
            "spec_accept_length": s.accept_length,
            "spec_accept_rate": s.accept_rate,
            "spec_num_steps": sched.num_steps,
            "is_cuda_graph": 1.0,
        }
        for key, value in values.items():
            self.gauges[key].labels(**self.labels).set(value)
        self.spec.publish(snap)
        p, g = s.prompt_tokens_total, s.generation_tokens_total
        self.prompt_tokens.labels(**self.labels).inc(p - self._counted[0])
        self.generation_tokens.labels(**self.labels).inc(g - self._counted[1])
        self._counted = (p, g)

    def render(self) -> tuple[bytes, str]:
        self._update()
        return generate_latest(self.registry), prometheus_client.CONTENT_TYPE_LATEST

    def loads_text(self, entries: list[dict[str, Any]]) -> str:
        lines = []
        for key in ("num_running_reqs", "num_waiting_reqs", "token_usage", "gen_throughput"):
            lines.append(f"# TYPE sglang:{key} gauge")
            for e in entries:
                lines.append(f'sglang:{key}{{dp_rank="{e["dp_rank"]}"}} {e[key]}')
        return "\n".join(lines) + "\n"
