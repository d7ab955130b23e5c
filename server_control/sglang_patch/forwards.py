"""Per mode: did the decode step's target forward and its draft-extend replay a CUDA graph
or run eager? (``snapshot["forwards"]``, gathered per rank, and the
``sglang:spec_disable_*_forwards_total{mode}`` counters.)

The target's answer is SGLang's own: ``GenerationBatchResult.can_run_cuda_graph`` (what
the decode log's ``cuda graph:`` flag shows). Draft-extend's: whether
``EAGLEDraftExtendCudaGraphRunner.execute`` (the graph replay SGLang's
``_draft_extend_for_decode`` takes instead of an eager ``draft_runner.forward``) ran
during the step: ``patch_runner`` counts its calls in this process. A cold step (no
draft-extend, cold_draft.py) counts its target forward only.
"""

from __future__ import annotations

from server_control.protocol import decision
from server_control.protocol.spec_metrics import FORWARD_PARTS
from server_control.sglang_patch.sglang_shapes import DraftExtendGraphRunner, RankState
from server_control.sglang_patch.wrapping import wrap_methods

_replays = [0]  # draft-extend graph replays in this process


def replays() -> int:
    return _replays[0]


def patch_runner(cls: type[DraftExtendGraphRunner]) -> None:
    if getattr(cls, "_specconsole_patched", False):
        return
    orig = cls.execute

    def execute(self: DraftExtendGraphRunner, *args: object, **kwargs: object) -> object:
        _replays[0] += 1
        return orig(self, *args, **kwargs)

    wrap_methods(cls, ((execute, orig),))


def count(dyn: RankState, forced: bool, result: object, replays_before: int, drafted: bool = True) -> None:
    """One decode step of ``dyn``'s rank, in the mode it ran in (``drafted``: False for a
    cold step, which ran no draft-extend at all: counted by ``cold_steps`` instead)."""
    if dyn.forwards is None:
        dyn.forwards = {m: dict.fromkeys(FORWARD_PARTS, 0) for m in decision.MODES}
    slot = dyn.forwards[decision.TARGET_ONLY if forced else decision.SPECULATIVE]
    slot["target_graph" if getattr(result, "can_run_cuda_graph", False) else "target_eager"] += 1
    if drafted:
        slot["draft_extend_graph" if _replays[0] != replays_before else "draft_extend_eager"] += 1
