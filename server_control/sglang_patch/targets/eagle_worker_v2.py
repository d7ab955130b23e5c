"""``sglang.srt.speculative.eagle_worker_v2``: patch ``EAGLEWorkerV2`` (what each wrapper
does is in worker.py's docstring), count ``EAGLEDraftExtendCudaGraphRunner`` replays
(forwards.py) and let target-only steps sample like a plain server
(target_only_sampling.py, which wraps ``eagle_worker_common.eagle_sample``, imported by
this module), skip draft-extend's lm_head while target-only (lazy_draft_head.py) and skip
draft-extend itself on a step above the cold mark (cold_draft.py).
Full mode only."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from server_control.sglang_patch import (
    cold_draft,
    current_rank,
    draft_catch_up,
    forwards,
    gate,
    hook,
    lazy_draft_head,
    overrides,
    target_only_sampling,
    worker,
)
from server_control.sglang_patch.sglang_shapes import EagleWorkerV2, GenerationBatchResult, ScheduleBatch, SpecRuntimeState
from server_control.sglang_patch.wrapping import wrap_methods


def after(module: ModuleType) -> None:
    if hook.mode() != hook.FULL:
        return
    cls = module.EAGLEWorkerV2
    if not getattr(cls, "_specconsole_patched", False):
        forwards.patch_runner(module.EAGLEDraftExtendCudaGraphRunner)
        _patch_worker(cls, module)
        try:
            cold_draft.patch(getattr(module, "envs", None))
        except Exception as exc:  # noqa: BLE001 - an option: never stop the worker (no step is marked cold)
            cold_draft.logger.warning(cold_draft.UNAVAILABLE_LINE.format(why=f"patching failed: {exc!r}"))
        try:
            lazy_draft_head.patch(module, _step_forced)
        except Exception as exc:  # noqa: BLE001 - an optimisation: never stop the worker
            lazy_draft_head.logger.warning(lazy_draft_head.OFF_LINE.format(why=f"patching failed: {exc!r}"))
    target_only_sampling.patch()


def _step_forced() -> bool:
    """Whether the patch forced the decode step now running target-only."""
    dyn = current_rank.current()
    return dyn is not None and dyn.step_forced is True


def _catch_up_capture(
    worker_: EagleWorkerV2, dyn: worker.DynamicSpeculation | None, batch: object
) -> draft_catch_up.Capture | None:
    """What a cold step keeps, or a catch-up step needs, read before the forward; None where
    no step of this forward can be cold (a prefill, the mark at 0 with nothing kept)."""
    if dyn is None or not dyn.ready or dyn.switch is None or worker.prefills(batch):
        return None
    if dyn.switch.cold_draft_above <= 0 and not draft_catch_up.pending():
        return None
    if not draft_catch_up.eligible(worker_):
        return None
    return draft_catch_up.capture(batch)


def _patch_worker(cls: type[EagleWorkerV2], module: ModuleType) -> None:
    orig_init: Callable[..., None] = cls.__init__
    orig_graphs = cls.init_cuda_graphs
    orig_activate = cls.activate_step_by_batch
    orig_forward = cls.forward_batch_generation
    orig_verified = cls.on_verify_complete_cpu
    orig_apply = cls.apply_runtime_state

    def __init__(self: EagleWorkerV2, server_args: object, *args: object, **kwargs: object) -> None:
        orig_init(self, server_args, *args, **kwargs)
        try:
            self._dynspec = worker.init_state(self, server_args, cls)
        except Exception as exc:  # noqa: BLE001 - never keep the worker from starting
            why = f"worker set-up failed: {exc!r}"
            self._dynspec = worker.DynamicSpeculation(None, why, self)
            gate.not_active(why)
        current_rank.set_current(self._dynspec)

    def init_cuda_graphs(self: EagleWorkerV2) -> None:
        from server_control.sglang_patch import startup

        free_before = startup.free_gib(self) if "_dynspec" in self.__dict__ else None
        orig_graphs(self)
        if self.__dict__.get("_dynspec") is not None:
            startup.prepare(self, module, free_before, worker.build_states)  # agree, then build (or stop)

    def activate_step_by_batch(self: EagleWorkerV2, batch_size: int) -> None:
        worker.on_decode_step(self, batch_size, orig_activate)

    def forward_batch_generation(
        self: EagleWorkerV2, batch: ScheduleBatch, *args: object, **kwargs: object
    ) -> GenerationBatchResult:
        replays = forwards.replays()
        worker.on_forward(self, batch)  # decode-only cost curves: a prefill between decode steps is not timed
        dyn = self.__dict__.get("_dynspec")
        cap = _catch_up_capture(self, dyn, batch)
        with cold_draft.step() as step:  # activate_step_by_batch marks it inside, SGLang reads it (cold_draft.py)
            out = orig_forward(self, batch, *args, **kwargs)
        if cap is not None and step.cold and dyn is not None:
            if dyn.catch_up:
                draft_catch_up.catch_up(self, module, batch, out, cap)
            else:
                draft_catch_up.keep(out, cap)
        if dyn is not None and dyn.step_forced is not None:
            forwards.count(dyn, dyn.step_forced, out, replays, drafted=not step.cold)
            try:
                out._specconsole_forced = dyn.step_forced
            except AttributeError:
                pass
            dyn.step_forced = None
        return out

    def on_verify_complete_cpu(self: EagleWorkerV2, num_correct_drafts_per_req: list[int], batch_size: int = 0) -> None:
        worker.on_verified(self, num_correct_drafts_per_req, batch_size, orig_verified)

    def apply_runtime_state(self: EagleWorkerV2, state: SpecRuntimeState) -> None:
        orig_apply(self, state)
        overrides.compact()

    wrap_methods(
        cls,
        (
            (__init__, orig_init),
            (init_cuda_graphs, orig_graphs),
            (activate_step_by_batch, orig_activate),
            (forward_batch_generation, orig_forward),
            (on_verify_complete_cpu, orig_verified),
            (apply_runtime_state, orig_apply),
        ),
    )
