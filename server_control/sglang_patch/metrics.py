"""The patch's metrics on SGLang's ``/metrics`` (with ``--enable-metrics``).

``SchedulerMetricsCollector.__init__`` (each scheduler rank whose metrics SGLang collects;
patched in targets/metrics_collector.py) also creates the
``server_control.protocol.spec_metrics`` gauges and counters, with SGLang's own labels
(model_name, engine_type, tp_rank, pp_rank, ...) and its prometheus multiprocess registry,
so the HTTP server's ``/metrics`` shows them next to SGLang's. They are published when
SGLang publishes its scheduler stats (``log_stats``, every ``--decode-log-interval``
decode steps), at every switch and at every runtime change, never per decode step (the
per-step counting is plain integers in ``SpecSwitch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server_control.protocol.spec_metrics import SpecMetrics

_metrics: list[SpecMetrics] = []  # one SpecMetrics per process (prometheus names are process-global)


def publish() -> None:
    """Publish this rank's current state, if metrics are on in this process."""
    if not _metrics:
        return
    from server_control.sglang_patch.current_rank import current

    dyn = current()
    if dyn is None or dyn.switch is None:
        return
    try:
        _metrics[0].publish(dyn.snapshot())
    except Exception:  # noqa: BLE001 - metrics never break serving
        pass


def register(labels: Mapping[str, str]) -> None:
    """The first ``SchedulerMetricsCollector`` of this process creates the metrics with its
    labels (targets/metrics_collector.py)."""
    if _metrics:
        return
    from prometheus_client import Counter, Gauge

    from server_control.protocol.spec_metrics import SpecMetrics

    _metrics.append(SpecMetrics(Gauge, Counter, dict(labels), multiprocess=True))
