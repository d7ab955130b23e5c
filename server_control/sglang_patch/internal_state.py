"""SchedulerInternalStateController patch: runtime settings and live state per rank.

  * ``_update_handlers``: SGLang's allowlist for ``POST /set_internal_state`` gains the
    four keys. Validation raises SGLang's ``UpdateRejected`` with our line
    (``Dynamic speculation: refused <key>=<value>: <reason>``), which SGLang logs and
    answers with ``false``; nothing is applied when any key of the request is refused.
    Apply changes this rank's ``SpecSwitch`` (effective from the next decode step; every
    rank handles the broadcast request at the same point of its loop) and returns the
    value for SGLang's ``get_context().override`` so readbacks show it.
  * ``get_internal_state``: each entry of ``/server_info`` ``internal_states`` gets the
    four live values and ``"dynamic_speculation": SpecSwitch.snapshot()`` (+ active/reason).
  * ``__init__``: a scheduler whose speculative worker carries no switch (no speculation,
    NGRAM, DFLASH, multi-layer EAGLE, ...) logs why the patch is not active there.
"""
from __future__ import annotations

import logging

from server_control import decision
from server_control.sglang_patch import gate
from server_control.sglang_patch.fields import NEW_FIELDS, VALIDATORS

logger = logging.getLogger("sglang.srt.managers.scheduler_components.internal_state")


def find(scheduler):
    """The rank's DynamicSpeculation (held by its EAGLEWorkerV2), or None."""
    return getattr(getattr(scheduler, "draft_worker", None), "_dynspec", None)


def _why_absent(scheduler) -> str:
    algo = getattr(scheduler, "spec_algorithm", None)
    worker = getattr(scheduler, "draft_worker", None)
    if algo is None or (hasattr(algo, "is_none") and algo.is_none()):
        return "no speculative decoding on this server (--speculative-algorithm not set)"
    name = getattr(algo, "name", algo)
    if worker is None:
        return f"speculative algorithm {name}: this rank holds no draft worker"
    return (f"speculative algorithm {name} runs {type(worker).__name__}, not EAGLEWorkerV2 "
            "(only EAGLE/EAGLE3 have the steps=0 target-only path)")


def force_value(value) -> str:
    """The force mode from a request. SGLang's HTTP layer types /set_internal_state values
    as numbers (a JSON string is answered 422 before it reaches a scheduler), so over HTTP
    the mode is its index in FORCE_CHOICES: 0 = auto, 1 = speculative, 2 = target_only.
    Names are accepted too (Engine API, in-process callers)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if float(value).is_integer() and 0 <= int(value) < len(decision.FORCE_CHOICES):
            return decision.FORCE_CHOICES[int(value)]
        raise ValueError(
            f"{decision.FORCE_KEY} must be one of "
            + ", ".join(f"{i} ({name})" for i, name in enumerate(decision.FORCE_CHOICES))
            + f", got {value}")
    return decision.validate_force(value)


def _check(key: str, value):
    if key == decision.FORCE_KEY:
        return force_value(value)
    return VALIDATORS[key](value)


def _leaf_known(key: str) -> bool:
    try:
        from sglang.srt.runtime_context import get_context
        return key in type(get_context().server_args).__struct_fields__
    except Exception:  # noqa: BLE001 - unpublished context
        return False


def patch(module) -> None:
    cls = module.SchedulerInternalStateController
    if getattr(cls, "_specconsole_patched", False):
        return
    rejected = module.UpdateRejected
    handler_cls = module._UpdateHandler
    orig_init = cls.__init__
    orig_handlers = cls._update_handlers
    orig_get = cls.get_internal_state

    def validate(self, key, value):
        dyn = find(self.scheduler)
        if dyn is None or not dyn.active:
            reason = dyn.reason if dyn is not None else _why_absent(self.scheduler)
            raise rejected(f"Dynamic speculation: refused {key}={value}: "
                           f"dynamic speculation disable is not active on this rank ({reason})")
        try:
            _check(key, value)
        except ValueError as exc:
            raise rejected(f"Dynamic speculation: refused {key}={value}: {exc}") from None

    def apply(self, key, value):
        switch = find(self.scheduler).switch
        if key == decision.THRESHOLD_KEY:
            message = switch.set_threshold(value)
            new = switch.threshold
        elif key == decision.FORCE_KEY:
            message = switch.set_force(force_value(value))
            new = switch.force
        elif key == decision.HYSTERESIS_KEY:
            old, switch.hysteresis = switch.hysteresis, decision.validate_hysteresis(value)
            new = switch.hysteresis
            message = (f"Dynamic speculation: hysteresis changed {old} -> {new} "
                       f"(resume_at<={switch.low_mark})")
        else:
            old, switch.min_dwell_steps = switch.min_dwell_steps, decision.validate_dwell(value)
            new = switch.min_dwell_steps
            message = f"Dynamic speculation: min_dwell_steps changed {old} -> {new}"
        logger.info(message)
        return {key: new} if _leaf_known(key) else None

    def __init__(self, scheduler, *args, **kwargs):
        orig_init(self, scheduler, *args, **kwargs)
        if find(scheduler) is None:
            gate.not_active(_why_absent(scheduler))

    def _update_handlers(self):
        handlers = orig_handlers(self)
        for key in NEW_FIELDS:
            handlers[key] = handler_cls(
                lambda k, v, _self=self: validate(_self, k, v),
                lambda k, v, _self=self: apply(_self, k, v))
        return handlers

    def get_internal_state(self, recv_req):
        output = orig_get(self, recv_req)
        state = getattr(output, "internal_state", None)
        dyn = find(self.scheduler)
        if isinstance(state, dict):
            if dyn is not None and dyn.switch is not None:
                sw = dyn.switch
                state.update({decision.THRESHOLD_KEY: sw.threshold,
                              decision.HYSTERESIS_KEY: sw.hysteresis,
                              decision.DWELL_KEY: sw.min_dwell_steps,
                              decision.FORCE_KEY: sw.force})
                state[decision.STATE_KEY] = dyn.snapshot()
            else:
                reason = dyn.reason if dyn is not None else _why_absent(self.scheduler)
                state[decision.STATE_KEY] = {"enabled": False, "active": False,
                                             "reason": reason}
        return output

    for new, old in ((__init__, orig_init), (_update_handlers, orig_handlers),
                     (get_internal_state, orig_get)):
        new.__wrapped__ = old
        new.__doc__ = old.__doc__
        new.__qualname__ = old.__qualname__
        setattr(cls, old.__name__, new)
    cls._specconsole_patched = True
