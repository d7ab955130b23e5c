"""``sglang.srt.managers.scheduler_components.batch_result_processor``: let the worker see
which step a verify result came from (``worker.settling``).

``_resolve_spec_v2_tokens(result, batch)`` calls ``on_verify_complete_cpu`` with the
per-request counts only; the wrapper exposes the result it is settling so the worker can
tell which step (forced or not, how many draft tokens) the counts belong to. Full mode only.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from server_control.sglang_patch import hook, worker
from server_control.sglang_patch.wrapping import wrap_methods


def after(module: ModuleType) -> None:
    if hook.mode() != hook.FULL:
        return
    cls = module.SchedulerBatchResultProcessor
    if getattr(cls, "_specconsole_patched", False):
        return
    orig: Callable[[object, object, object], list[list[int]]] = cls._resolve_spec_v2_tokens
    settling = worker.settling

    def _resolve_spec_v2_tokens(self: object, result: object, batch: object) -> list[list[int]]:
        previous, settling[0] = settling[0], result
        try:
            return orig(self, result, batch)
        finally:
            settling[0] = previous

    wrap_methods(cls, ((_resolve_spec_v2_tokens, orig),))
