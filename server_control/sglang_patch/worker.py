"""EAGLEWorkerV2 patch: one SpecSwitch per rank, consulted once per decode step.

  * ``__init__``: read the four settings, check the set-up is one the steps=0 state can
    serve, log the init line (or one ``NOT active`` line with the reason).
  * ``init_cuda_graphs``: after SGLang's own, have the normal runtime state and the
    target-only one (``speculative_num_steps=0, draft_tokens=1``), built the way the
    adaptive controller builds its states (``build_adaptive_runtime_state``), or taken
    from the adaptive controller when ``--speculative-adaptive`` already built steps=0.
  * ``activate_step_by_batch(bs)``: SGLang calls it at the top of every decode step
    (never for prefill/extend batches) with the number of decode requests. We run
    ``SpecSwitch.decide(bs)`` and swap the runtime state with ``apply_runtime_state``.
    With steps=0, ``forward_batch_generation`` takes SGLang's own "drafting disabled"
    branch: a one-token trivial verify (a plain target decode) and, still, draft-extend,
    so the draft KV stays warm.
  * ``on_verify_complete_cpu``: count the tokens committed per mode (CPU list, no sync).
"""
from __future__ import annotations

import logging
import os
import time

from server_control import decision
from server_control.sglang_patch import gate

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")


class DynamicSpeculation:
    """The per-rank live state held by the worker as ``worker._dynspec``."""

    __slots__ = ("switch", "active", "reason", "normal_state", "target_only_state")

    def __init__(self, switch: decision.SpecSwitch | None, reason: str | None) -> None:
        self.switch = switch
        self.active = reason is None and switch is not None
        self.reason = reason
        self.normal_state = None
        self.target_only_state = None

    def deactivate(self, reason: str) -> None:
        self.active = False
        self.reason = reason
        gate.not_active(reason)

    def snapshot(self) -> dict:
        if self.switch is None:
            return {"enabled": False, "active": False, "reason": self.reason}
        snap = self.switch.snapshot()
        snap["active"] = self.active
        snap["reason"] = self.reason
        return snap


def read_settings(server_args) -> dict:
    """The four settings as published (``get_spec()``), else as on the record."""
    from server_control.sglang_patch.fields import DEFAULTS
    try:
        from sglang.srt.runtime_context import get_spec
        bag = get_spec()
    except Exception:  # noqa: BLE001 - not published (tests, odd launchers)
        bag = None
    out = {}
    for key, default in DEFAULTS.items():
        value = getattr(bag, key, None) if bag is not None else None
        if value is None:
            value = getattr(server_args, key, default)
        out[key] = value
    return out


def unsupported_reason(worker, server_args, worker_cls) -> str | None:
    """Why the steps=0 target-only path cannot serve this set-up, or None."""
    if type(worker) is not worker_cls:
        return (f"speculative worker {type(worker).__name__} is not EAGLEWorkerV2 "
                "(only EAGLE/EAGLE3 on the standard worker have the steps=0 target-only path)")
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.speculative.adaptive_spec_params import adaptive_unsupported_reason
    # SGLang's own list of what its steps-switching machinery supports: EAGLE/EAGLE3,
    # built-in worker, topk == 1, no attention DP, no multi-layer EAGLE, no TBO, no PDMux.
    reason = adaptive_unsupported_reason(server_args)
    if reason is not None:
        return reason
    pp = get_parallel().pp_size
    if pp > 1 or not getattr(worker, "_hosts_draft", True) or worker._draft_worker is None:
        return (f"pipeline parallelism (pp_size={pp}) is not supported "
                "(only the last stage hosts the draft model)")
    return None


def _init_state(worker, server_args, worker_cls) -> DynamicSpeculation:
    settings = read_settings(server_args)
    try:
        switch = decision.SpecSwitch(
            settings[decision.THRESHOLD_KEY], settings[decision.HYSTERESIS_KEY],
            settings[decision.DWELL_KEY], settings[decision.FORCE_KEY])
    except ValueError as exc:
        dyn = DynamicSpeculation(None, f"bad setting: {exc}")
        gate.not_active(dyn.reason)
        return dyn
    try:
        reason = unsupported_reason(worker, server_args, worker_cls)
    except Exception as exc:  # noqa: BLE001
        reason = f"cannot check the set-up ({exc!r})"
    dyn = DynamicSpeculation(switch, reason)
    if reason is not None:
        gate.not_active(reason)
        return dyn
    if switch.threshold > 0:
        logger.info(decision.init_line(switch.threshold, switch.hysteresis,
                                       switch.min_dwell_steps))
    else:
        logger.info("Dynamic speculation: ready, threshold=0 (never disable); "
                    "settable at runtime via /set_internal_state")
    if switch.force != decision.AUTO:
        logger.info(f"Dynamic speculation: force mode set to {switch.force}")
    if os.environ.get("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", "").lower() in ("1", "true", "yes"):
        logger.warning("Dynamic speculation: SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND is set: "
                       "draft-extend is skipped while target-only, so acceptance is low "
                       "for a while after speculation resumes")
    return dyn


def build_states(worker, module) -> None:
    """Have the normal and the target-only (steps=0) runtime states on ``worker._dynspec``."""
    dyn = worker._dynspec
    controller = getattr(worker, "adaptive_controller", None)
    if controller is not None and 0 in getattr(controller, "_states", {}):
        dyn.target_only_state = controller._states[0]
        return  # the adaptive controller owns the speculative states
    dw = worker._draft_worker
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
    with (module.draft_tp_context(dw.parallel_layout),
          module.speculative_moe_backend_context(),
          module.speculative_moe_a2a_backend_context()):
        # cuda_graph_bs=None: capture every decode bucket, since N moves at runtime.
        dyn.target_only_state = worker.build_adaptive_runtime_state(
            speculative_num_steps=0, speculative_num_draft_tokens=1, cuda_graph_bs=None)
    if controller is not None:
        controller.register(dyn.target_only_state, steps=0)


def on_decode_step(worker, batch_size: int, original) -> None:
    """The per-step decision (wraps ``activate_step_by_batch``)."""
    dyn = worker.__dict__.get("_dynspec")
    if dyn is None or not dyn.active or dyn.target_only_state is None:
        original(worker, batch_size)
        return
    switch = dyn.switch
    message = switch.decide(batch_size, time.monotonic())
    if message is not None:
        logger.info(message)
    if switch.mode == decision.TARGET_ONLY:
        if worker.speculative_num_steps != 0:
            worker.apply_runtime_state(dyn.target_only_state)
    elif dyn.normal_state is None:  # the adaptive controller picks the speculative state
        original(worker, batch_size)
    elif worker.speculative_num_steps != dyn.normal_state.speculative_num_steps:
        worker.apply_runtime_state(dyn.normal_state)


def patch(module) -> None:
    cls = module.EAGLEWorkerV2
    if getattr(cls, "_specconsole_patched", False):
        return
    orig_init = cls.__init__
    orig_graphs = cls.init_cuda_graphs
    orig_activate = cls.activate_step_by_batch
    orig_verified = cls.on_verify_complete_cpu

    def __init__(self, server_args, *args, **kwargs):
        orig_init(self, server_args, *args, **kwargs)
        try:
            self._dynspec = _init_state(self, server_args, cls)
        except Exception as exc:  # noqa: BLE001 - never keep the worker from starting
            self._dynspec = DynamicSpeculation(None, f"worker set-up failed: {exc!r}")
            gate.not_active(self._dynspec.reason)

    def init_cuda_graphs(self):
        orig_graphs(self)
        dyn = self.__dict__.get("_dynspec")
        if dyn is None or not dyn.active:
            return
        try:
            build_states(self, module)
        except Exception as exc:  # noqa: BLE001 - serve speculatively rather than crash
            dyn.deactivate(f"could not build the target-only (steps=0) runtime state: {exc!r}")
            return
        logger.info("Dynamic speculation: target-only runtime state ready "
                    "(speculative_num_steps=0, draft-extend kept)")

    def activate_step_by_batch(self, batch_size):
        on_decode_step(self, batch_size, orig_activate)

    def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0):
        dyn = self.__dict__.get("_dynspec")
        if dyn is not None and dyn.switch is not None:
            dyn.switch.add_tokens(sum(num_correct_drafts_per_req) + len(num_correct_drafts_per_req))
        return orig_verified(self, num_correct_drafts_per_req, batch_size=batch_size)

    for new, old in ((__init__, orig_init), (init_cuda_graphs, orig_graphs),
                     (activate_step_by_batch, orig_activate),
                     (on_verify_complete_cpu, orig_verified)):
        new.__wrapped__ = old
        new.__doc__ = old.__doc__
        new.__qualname__ = old.__qualname__
        setattr(cls, old.__name__, new)
    cls._specconsole_patched = True
