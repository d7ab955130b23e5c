"""``sglang.srt.observability.metrics_collector``: the patch's metrics (metrics.py) are
created in ``SchedulerMetricsCollector.__init__`` with SGLang's labels and published from
its ``log_stats``. Full mode only."""

from __future__ import annotations

from types import ModuleType

from server_control.sglang_patch import hook, metrics
from server_control.sglang_patch.wrapping import wrap_methods


def after(module: ModuleType) -> None:
    if hook.mode() != hook.FULL:
        return
    cls = module.SchedulerMetricsCollector
    if getattr(cls, "_specconsole_patched", False):
        return
    orig_init, orig_log = cls.__init__, cls.log_stats

    def __init__(self: object, labels: dict[str, str], *args: object, **kwargs: object) -> None:
        orig_init(self, labels, *args, **kwargs)
        metrics.register(labels)
        metrics.publish()

    def log_stats(self: object, stats: object) -> None:
        orig_log(self, stats)
        metrics.publish()

    wrap_methods(cls, ((__init__, orig_init), (log_stats, orig_log)))
