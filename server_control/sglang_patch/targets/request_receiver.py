"""``sglang.srt.managers.scheduler_components.request_receiver``: the in-server tuner's
moves ride SGLang's own request broadcast (sglang_patch/autotune.py).

``SchedulerRequestReceiver.recv_requests(local_reqs)`` pulls on TP0 and broadcasts
``[*pulled, *local_reqs]`` to every TP rank. The class is a frozen slots dataclass, so the
method is wrapped on the class. With ``--speculative-disable-auto-tune`` the wrapper adds
TP0's ``TuneMove`` (if the tuner moved) to ``local_reqs`` and, on every rank, takes the
moves out of the returned list and applies them before SGLang's dispatcher sees the list.
Without the flag it calls SGLang's method and nothing else. Full mode only.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from server_control.sglang_patch import autotune, hook
from server_control.sglang_patch.wrapping import wrap_methods


def patch(module: ModuleType) -> None:
    cls = module.SchedulerRequestReceiver
    if getattr(cls, "_specconsole_patched", False):
        return
    orig: Callable[[object, list[object] | None], list[object]] = cls.recv_requests
    active = autotune._active

    def recv_requests(self: object, local_reqs: list[object] | None = None) -> list[object]:
        at = active[0]
        if at is None:
            return orig(self, local_reqs)
        move = at.offer()
        if move is not None:
            local_reqs = [*(local_reqs or ()), move]
        return at.take(orig(self, local_reqs))

    wrap_methods(cls, ((recv_requests, orig),))


def after(module: ModuleType) -> None:
    if hook.mode() == hook.FULL:
        patch(module)
