"""The per-rank switch state and what the patched EAGLEWorkerV2 methods do with it.

One SpecSwitch per rank, consulted once per decode step; the wrappers themselves are in
targets/eagle_worker_v2.py:

  * ``__init__``: read the five settings, check the set-up is one the steps=0 state can
    serve (``refusals.py``), or log one ``NOT active`` line with the reason.
  * ``init_cuda_graphs``: after SGLang's own, every rank of the tensor-parallel group
    agrees whether to build (``startup.prepare``), then each builds the normal runtime
    state and the target-only one (``speculative_num_steps=0, draft_tokens=1``) the way
    the adaptive controller builds its states (``build_adaptive_runtime_state``).
  * ``activate_step_by_batch(bs)``: SGLang calls it at the top of every decode step
    (never for prefill/extend batches) with the number of decode requests. We run
    ``SpecSwitch.decide(bs)``, then exploration (``protocol/explore.py``, as the simulator
    does: from the step number, the batch and N only, so every rank flips the same steps)
    may run the other mode for this step; we swap the runtime state with
    ``apply_runtime_state`` to the mode the step runs in.
    With steps=0, ``forward_batch_generation`` takes SGLang's own "drafting disabled"
    branch: a one-token trivial verify (a plain target decode) and, still, draft-extend,
    so the draft KV stays warm; unless the batch is above ``cold_draft_above``, where the
    step takes SGLang's own skip of draft-extend instead (cold_draft.py). At or below N
    with ``--speculative-adaptive``, SGLang's adaptive controller picks the step count as
    it would without the patch.
  * ``forward_batch_generation``: tags its result with whether the patch forced the step
    target-only, so the result, settled one step later under the overlap scheduler,
    is still attributed to the right mode (``on_verify_complete_cpu``).
  * ``on_verify_complete_cpu``: count tokens and acceptance per mode; a step the patch
    forced never feeds the adaptive controller.
  * ``apply_runtime_state``: after SGLang's own, keep the overrides log bounded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from server_control.protocol import decision, explore, runtime_settings, tuner
from server_control.protocol.cost_curves import CostCounters
from server_control.protocol.rank_verdict import Verdict
from server_control.sglang_patch import autotune, cold_draft, curves, draft_catch_up, gate, metrics, refusals
from server_control.sglang_patch.sglang_shapes import (
    AdaptiveController,
    AutoTunePort,
    EagleWorkerV2,
    SpecRuntimeState,
)

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")


# the verify result being settled (targets/batch_result_processor.py sets it)
settling: list[object] = [None]  # SGLang's GenerationBatchResult, read with getattr


class DynamicSpeculation:
    """The per-rank live state held by the worker as ``worker._dynspec``."""

    __slots__ = (
        "switch",
        "active",
        "reason",
        "normal_state",
        "target_only_state",
        "verdict",
        "step_forced",
        "worker",
        "run",
        "state_memory",
        "forwards",
        "limits",
        "curves",
        "explorer",
        "ran",
        "autotune",
        "catch_up",
    )

    def __init__(
        self,
        switch: decision.SpecSwitch | None,
        reason: str | None,
        worker: object = None,
        explorer: explore.Explorer | None = None,
    ) -> None:
        self.switch = switch
        self.active = reason is None and switch is not None
        self.reason = reason
        self.normal_state: SpecRuntimeState | None = None
        self.target_only_state: SpecRuntimeState | None = None
        self.verdict: Verdict | None = None  # once the TP group agreed (rank_agreement.settle)
        self.step_forced: bool | None = None  # this decode step forced target-only?
        self.worker = worker
        self.run = 0  # the agreement's run number (rank_agreement.settle)
        self.state_memory: dict[str, float | None] | None = None  # startup.prepare: GiB, this rank
        self.forwards: dict[str, dict[str, int]] | None = None  # graph / eager counts per mode
        self.limits: dict[str, int | None] | None = None  # startup.server_limits()
        self.curves: CostCounters | None = curves.new() if switch is not None else None  # cost per mode and batch
        self.explorer = explorer if explorer is not None else explore.Explorer()  # off unless set
        self.ran = decision.SPECULATIVE  # the mode this decode step runs in (after exploration)
        self.autotune: AutoTunePort | None = None  # autotune.AutoTune with --speculative-disable-auto-tune
        self.catch_up = False  # this decode step catches the cold draft up (draft_catch_up.py)

    @property
    def ready(self) -> bool:
        return self.active and self.target_only_state is not None

    def deactivate(self, reason: str) -> None:
        """Off from now on; the next decode step restores the normal state (or hands back to
        the adaptive controller), so the mode reported is the one that runs."""
        self.active = False
        self.reason = reason
        if self.switch is not None:
            self.switch.mode = decision.SPECULATIVE
        gate.not_active(reason)

    def num_steps(self) -> int | None:
        steps = getattr(self.worker, "speculative_num_steps", None)
        return steps if isinstance(steps, int) else None

    def snapshot(self) -> dict[str, object]:
        if self.switch is None:
            snap: dict[str, object] = {"enabled": False, "active": False, "reason": self.reason}
        else:
            snap = self.switch.snapshot()
            snap["active"] = self.active
            snap["reason"] = self.reason
            snap["num_steps"] = self.num_steps()  # the step count the worker really runs
            curves.publish(snap, self.curves)
            snap[explore.SNAPSHOT_KEY] = self.explorer.snapshot(self.switch.threshold)
            if self.autotune is not None:
                snap["auto_tune"] = self.autotune.snapshot()
        if self.verdict is not None:
            snap["tp_ranks"] = self.verdict.summary()
        if self.state_memory is not None:
            snap["state_memory"] = dict(self.state_memory)
        if self.limits is not None:
            snap["limits"] = dict(self.limits)
        if self.forwards is not None:
            snap["forwards"] = {mode: dict(c) for mode, c in self.forwards.items()}
        if self.switch is not None:
            snap["catch_up"] = draft_catch_up.counts()
        return snap


def read_settings(server_args: object) -> dict[str, Any]:  # untyped: as SGLang's bags hold them (init_state checks)
    """The patch's settings as published (``get_spec()``), else as on the record."""
    from server_control.sglang_patch.fields import AUTO_TUNE_FIELD, defaults

    try:
        from sglang.srt.runtime_context import get_spec

        bag = get_spec()
    except Exception:  # noqa: BLE001 - not published (tests, odd launchers)
        bag = None
    out = {}
    for key, default in {**defaults(), AUTO_TUNE_FIELD: ""}.items():
        value = getattr(bag, key, None) if bag is not None else None
        if value is None:
            value = getattr(server_args, key, default)
        out[key] = value
    return out


def init_state(worker: EagleWorkerV2, server_args: object, worker_cls: type) -> DynamicSpeculation:
    settings = read_settings(server_args)
    try:
        switch = decision.SpecSwitch(**{s.field: s.validate(settings[s.key]) for s in runtime_settings.SETTINGS})
        explorer = explore.Explorer(settings[explore.SHARE_KEY])
    except ValueError as exc:
        dyn = DynamicSpeculation(None, f"bad setting: {exc}", worker)
        gate.not_active(f"bad setting: {exc}")
        return dyn
    try:
        reason = refusals.reason(worker, server_args, worker_cls)
    except Exception as exc:  # noqa: BLE001 - an unknown set-up turns the switch off, never the server
        reason = f"cannot check the set-up ({exc!r})"
    dyn = DynamicSpeculation(switch, reason, worker, explorer)
    if reason is not None:
        gate.not_active(reason)
    autotune.configure(dyn, settings[tuner.AUTO_TUNE_KEY] or "")
    return dyn


def _covers_every_bucket(controller: AdaptiveController) -> bool:
    """Whether the adaptive controller's steps=0 state has a graph for every decode bucket
    (its own tiers may prune the buckets that cannot reach steps=0). SGLang builds that
    state with ``cuda_graph_bs=params.cuda_graph_bs_for_step(0)`` (``init_states``): None
    (graphs off, or no bucket list handed) builds every bucket (``_override_worker_state``
    leaves the buckets alone for None); a list covers every bucket only when it is the
    whole list SGLang handed the controller (``init_cuda_graphs``: None with decode graphs
    off, else ``get_exec().graph.cuda_graph_bs_decode``). Public names only."""
    from sglang.srt.model_executor.cuda_graph_config import (
        Backend,
        Phase,
        check_cuda_graph_backend,
    )
    from sglang.srt.runtime_context import get_exec

    reach = controller.params.cuda_graph_bs_for_step(0)
    if reach is None:
        return True
    handed = None if check_cuda_graph_backend(Phase.DECODE, Backend.DISABLED) else get_exec().graph.cuda_graph_bs_decode
    return handed is not None and sorted(reach) == sorted(handed)


def _pruned_line(reach: list[int] | None) -> str:
    """What a pruned steps=0 tier means for target-only batches: SGLang's graph runner pads a
    batch up to the next captured bucket, so only batches above its largest run eager."""
    if not reach:
        return (
            "Dynamic speculation: the adaptive controller's steps=0 state has no CUDA graph "
            "bucket: target-only steps run eager (reused, not rebuilt)"
        )
    return (
        f"Dynamic speculation: the adaptive controller's steps=0 state has CUDA graphs for "
        f"batch sizes {reach} only: a target-only batch pads up to the next of them "
        f"(SGLang's padding) and runs eager above {max(reach)} (reused, not rebuilt)"
    )


def build_states(worker: EagleWorkerV2, module: ModuleType) -> None:
    """Have the target-only (steps=0) runtime state on ``worker._dynspec``, and the normal
    one unless SGLang's adaptive controller owns the speculative states."""
    dyn = worker._dynspec
    controller: AdaptiveController | None = getattr(worker, "adaptive_controller", None)
    dw = worker._draft_worker
    assert dw is not None  # refusals.pipeline: a worker without a draft is never built for
    if controller is not None:
        dyn.normal_state = None  # at or below N the adaptive controller picks the step count
        own = controller._states.get(0)  # anchored (gate.py, test_behaviour_anchors.py)
        if own is not None:  # never a second full state: reuse SGLang's, padded
            dyn.target_only_state = own
            if not _covers_every_bucket(controller):
                logger.info(_pruned_line(controller.params.cuda_graph_bs_for_step(0)))
            return
    else:
        dyn.normal_state = module.SpecRuntimeState(
            speculative_num_steps=worker.speculative_num_steps,
            speculative_num_draft_tokens=worker.speculative_num_draft_tokens,
            draft_attn_backend=dw.draft_attn_backend,
            cuda_graph_runner=dw.cuda_graph_runner,
            target_attn_backend=worker._target_worker.model_runner.attn_backend,
            target_graph_runner=worker._target_worker.model_runner.decode_cuda_graph_runner,
            draft_extend_attn_backend=dw.draft_extend_attn_backend,
            cuda_graph_runner_for_draft_extend=dw.cuda_graph_runner_for_draft_extend,
        )
    with (
        module.draft_tp_context(dw.parallel_layout),
        module.speculative_moe_backend_context(),
        module.speculative_moe_a2a_backend_context(),
    ):
        # cuda_graph_bs=None: capture every decode bucket, since N moves at runtime.
        dyn.target_only_state = worker.build_adaptive_runtime_state(
            speculative_num_steps=0, speculative_num_draft_tokens=1, cuda_graph_bs=None
        )


_forward_failed: list[str] = []  # on_forward's first failure in this process (said once)


def prefills(batch: object) -> bool:
    """The batch prefills (extend, a mixed chunk): SGLang's own test in
    ``EAGLEWorkerV2.forward_batch_generation`` (``forward_mode.is_extend() or is_extend_in_batch``)."""
    mode = getattr(batch, "forward_mode", None)
    return getattr(batch, "is_extend_in_batch", False) is True or (mode is not None and bool(mode.is_extend()))


def on_forward(worker: EagleWorkerV2, batch: object) -> None:
    """Before every forward of the worker (wraps ``forward_batch_generation``): a batch that
    prefills runs between two decode steps, so the decode step before it is not timed.
    The cost curves hold decode steps only, as the simulator's: a prefill caused by one
    step's finished requests lands after the NEXT step (the new request arrives while that
    one runs), so an explored target-only step amid speculative ones was charged the
    prefills of the speculative step before it, and target-only looked slower than it is."""
    dyn: DynamicSpeculation | None = worker.__dict__.get("_dynspec")
    try:
        if dyn is not None and dyn.ready and dyn.curves is not None and prefills(batch):
            dyn.curves.idle()
    except Exception as exc:  # noqa: BLE001 - bookkeeping never raises into serving: said once, the step stays timed
        if not _forward_failed:
            _forward_failed.append(repr(exc))
            logger.warning(f"Dynamic speculation: cost curves: cannot tell a prefill batch ({exc!r}); its step stays timed")


def on_decode_step(worker: EagleWorkerV2, batch_size: int, original: Callable[[EagleWorkerV2, int], None]) -> None:
    """The per-step decision (wraps ``activate_step_by_batch``)."""
    dyn: DynamicSpeculation | None = worker.__dict__.get("_dynspec")
    if dyn is None or not dyn.ready:
        if (
            dyn is not None
            and dyn.normal_state is not None
            and worker.speculative_num_steps != dyn.normal_state.speculative_num_steps
        ):
            worker.apply_runtime_state(dyn.normal_state)  # switched off while target-only
        original(worker, batch_size)
        return
    switch, costs, target_only = dyn.switch, dyn.curves, dyn.target_only_state
    assert switch is not None and costs is not None and target_only is not None  # ready: active (a switch, curves), built
    now = time.monotonic()
    message = switch.decide(batch_size, now)
    steps = switch.steps  # the step number, batch and N: the same on every rank
    ran = dyn.explorer.mode(
        switch.mode,
        steps[decision.SPECULATIVE] + steps[decision.TARGET_ONLY],
        batch_size,
        switch.threshold,
        switch.force == decision.AUTO,
    )
    cold = cold_draft.patched() and switch.draft_cold(batch_size, ran)
    dyn.catch_up = False
    if draft_catch_up.pending() and draft_catch_up.eligible(worker):
        if ran == decision.SPECULATIVE and switch.mode == decision.SPECULATIVE:
            ran = decision.TARGET_ONLY  # resuming: one more target-only step, whose verify adds the last row
            dyn.catch_up = True
        elif ran == decision.TARGET_ONLY and (not cold or draft_catch_up.due(batch_size)):
            dyn.catch_up = True
    dyn.ran = ran
    costs.step(ran, batch_size, now)  # cost curves (sglang_patch/curves.py), per mode run
    if dyn.catch_up:
        costs.idle()  # a catch-up step also runs the draft's extend over the kept rows: not a step's cost
    cold_draft.mark(cold or dyn.catch_up)
    if message is not None:
        logger.info(message)
        metrics.publish()
    if ran == decision.TARGET_ONLY:
        dyn.step_forced = True
        if worker.speculative_num_steps != 0:
            worker.apply_runtime_state(target_only)
        return
    dyn.step_forced = False
    if dyn.normal_state is None:  # SGLang's adaptive controller picks the speculative state
        original(worker, batch_size)
    elif worker.speculative_num_steps != dyn.normal_state.speculative_num_steps:
        worker.apply_runtime_state(dyn.normal_state)


def on_verified(
    worker: EagleWorkerV2, num_correct_drafts_per_req: list[int], batch_size: int, original: Callable[..., None]
) -> None:
    """Count the settled verify result in the mode its step ran in; a step the patch forced
    target-only never feeds SGLang's adaptive controller."""
    dyn: DynamicSpeculation | None = worker.__dict__.get("_dynspec")
    result = settling[0]
    forced = getattr(result, "_specconsole_forced", None) if result is not None else None
    if dyn is not None and dyn.switch is not None:
        if forced is None:  # not settled through the result processor: the current step
            forced = dyn.ready and dyn.ran == decision.TARGET_ONLY
        tokens = getattr(result, "speculative_num_draft_tokens", None)
        if not isinstance(tokens, int):
            tokens = worker.speculative_num_draft_tokens
        mode = decision.TARGET_ONLY if forced else decision.SPECULATIVE
        before = dyn.switch.tokens[mode]
        dyn.switch.record_verify(num_correct_drafts_per_req, tokens, mode)
        if dyn.ready and dyn.curves is not None:  # cost curves: the tokens record_verify just counted
            dyn.curves.commit(mode, len(num_correct_drafts_per_req), dyn.switch.tokens[mode] - before)
    if forced:
        return
    original(worker, num_correct_drafts_per_req, batch_size=batch_size)
