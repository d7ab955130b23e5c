"""``sglang.srt.managers.scheduler_components.internal_state``: the
``SchedulerInternalStateController`` patch, runtime settings and live state per rank.

  * ``_update_handlers``: SGLang's allowlist for ``POST /set_internal_state`` gains the
    five keys and ``speculative_disable_auto_tune`` (1/0: the in-server tuner on/off,
    sglang_patch/autotune.py; an operator's threshold turns it off). Validation raises SGLang's ``UpdateRejected`` with our line
    (``Dynamic speculation: refused <key>=<value>: <reason>``), which SGLang logs and
    answers with ``false``; nothing is applied when any key of the request is refused.
    Apply changes this rank's ``SpecSwitch`` (effective from the next decode step; every
    rank handles the broadcast request at the same point of its loop) and returns the
    value for SGLang's ``get_context().override`` so readbacks show it.
  * ``set_internal_state``: after SGLang's own, the overrides log is compacted; with
    TP > 1 every rank's values are gathered (``rank_agreement.gather_live``): the answer (TP0's)
    is ``true`` only when every rank holds the same values, and ranks that disagree turn
    the switch off on every rank (one ``NOT active`` line naming them).
  * ``get_internal_state``: each entry of ``/server_info`` ``internal_states`` gets the
    five live values and ``"dynamic_speculation": snapshot`` (+ active/reason, the real
    step count, and with TP > 1 ``"ranks"``: every TP rank's live values, gathered).
  * ``__init__``: a scheduler whose speculative worker carries no switch (no speculation,
    NGRAM, DFLASH, multi-layer EAGLE, ...) logs why the patch is not active there.

Report mode (``off_reason``: the version/anchor gate failed, hook.py): only the reason is
published and the five keys are refused with it.
"""

from __future__ import annotations

import logging
from typing import Any

from server_control.protocol import decision, explore, rank_verdict, runtime_settings, tuner
from server_control.sglang_patch import gate, metrics, overrides, rank_agreement
from server_control.sglang_patch.fields import new_fields, validator
from server_control.sglang_patch.wrapping import wrap_methods

logger = logging.getLogger("sglang.srt.managers.scheduler_components.internal_state")


def find(scheduler: Any) -> Any:
    """The rank's DynamicSpeculation (held by its EAGLEWorkerV2), or None."""
    return getattr(getattr(scheduler, "draft_worker", None), "_dynspec", None)


def _why_absent(scheduler: Any) -> str:
    algo = getattr(scheduler, "spec_algorithm", None)
    worker = getattr(scheduler, "draft_worker", None)
    if algo is None or (hasattr(algo, "is_none") and algo.is_none()):
        return "no speculative decoding on this server (--speculative-algorithm not set)"
    name = getattr(algo, "name", algo)
    if worker is None:
        return f"speculative algorithm {name}: this rank holds no draft worker"
    return (
        f"speculative algorithm {name} runs {type(worker).__name__}, not EAGLEWorkerV2 "
        "(only EAGLE/EAGLE3 have the steps=0 target-only path)"
    )


def _check(key: str, value: object) -> object:
    """The server's own check of a requested value. SGLang's HTTP layer types
    /set_internal_state values as numbers (a JSON string is answered 422 before it reaches a
    scheduler), so over HTTP a named setting (the forced mode) travels as its index: 0 =
    auto, 1 = speculative, 2 = target_only; names are accepted too (Engine API, in-process
    callers)."""
    if key == tuner.AUTO_TUNE_KEY:
        return tuner.validate_switch(value)
    setting = runtime_settings.by_key(key)
    return setting.from_wire(value) if setting is not None else validator(key)(value)


def _leaf_known(key: str) -> bool:
    try:
        from sglang.srt.runtime_context import get_context

        return key in type(get_context().server_args).__struct_fields__
    except Exception:  # noqa: BLE001 - unpublished context
        return False


def _publish(state: dict[str, Any], dyn: Any, reason: str | None, live: list[Any] | None) -> None:
    if dyn is not None and dyn.switch is not None:
        sw = dyn.switch
        state.update({s.key: sw.setting(s.field) for s in runtime_settings.SETTINGS})
        state[explore.SHARE_KEY] = dyn.explorer.share
        state[decision.STATE_KEY] = snap = dyn.snapshot()
        if live is not None:
            snap["ranks"] = live
    else:
        state[decision.STATE_KEY] = {"enabled": False, "active": False, "reason": reason}


def _check_ranks(dyn: Any, output: Any, failure: BaseException | None = None) -> Any:
    """After a set: every TP rank must hold the same values, else all turn the switch off.
    ``failure``: SGLang's own set failed on this rank (it still takes part, then raises)."""
    rows = rank_agreement.gather_live(dyn, failure) if dyn is not None else None
    if failure is not None:
        raise failure
    if not rows:
        return output
    problem = rank_verdict.disagreement(rows)
    if problem is None:
        return output
    if dyn.active:
        dyn.deactivate(f"TP ranks disagree after /set_internal_state: {problem}; the switch is off on every rank")
    return type(output)(updated=False)


def _cache(controller: Any) -> rank_agreement.LiveCache:
    cache = controller.__dict__.get("_specconsole_live")
    if not isinstance(cache, rank_agreement.LiveCache):
        cache = controller._specconsole_live = rank_agreement.LiveCache()
    return cache


class _Patch:
    """What the wrappers of one patched controller class share: SGLang's originals, its
    ``UpdateRejected`` and ``_UpdateHandler``, and the report-mode reason."""

    def __init__(self, module: Any, off_reason: str | None) -> None:
        cls = module.SchedulerInternalStateController
        self.rejected = module.UpdateRejected
        self.handler_cls = module._UpdateHandler
        self.off_reason = off_reason
        self.init = cls.__init__
        self.handlers = cls._update_handlers
        self.get = cls.get_internal_state
        self.set = cls.set_internal_state

    def dyn(self, controller: Any) -> Any:
        return find(controller.scheduler) if self.off_reason is None else None

    def why_off(self, controller: Any) -> str | None:
        if self.off_reason is not None:
            return self.off_reason
        dyn = find(controller.scheduler)
        if dyn is None:
            return _why_absent(controller.scheduler)
        return None if dyn.active else dyn.reason

    def validate(self, controller: Any, key: Any, value: Any) -> None:
        reason = self.why_off(controller)
        if reason is not None:
            raise self.rejected(
                f"Dynamic speculation: refused {key}={value}: dynamic speculation disable is not active on this rank ({reason})"
            )
        if key == tuner.AUTO_TUNE_KEY and find(controller.scheduler).autotune is None:
            raise self.rejected(
                f"Dynamic speculation: refused {key}={value}: the server was started without "
                "--speculative-disable-auto-tune LO-HI (the tuner's bounds)"
            )
        try:
            _check(key, value)
        except ValueError as exc:
            raise self.rejected(f"Dynamic speculation: refused {key}={value}: {exc}") from None


def _apply(controller: Any, key: Any, value: Any) -> Any:
    """A validated setting on this rank's switch; SGLang's override for the readback."""
    dyn = find(controller.scheduler)
    if key == tuner.AUTO_TUNE_KEY:  # a command, not a config leaf: no override
        logger.info(dyn.autotune.switch(tuner.validate_switch(value)))
        return None
    if key == explore.SHARE_KEY:  # every rank applies it at the same point of its loop
        message, new = dyn.explorer.set_share(value), dyn.explorer.share
    else:
        message, new = runtime_settings.apply(dyn.switch, runtime_settings.named(key), value)
    logger.info(message)
    if key == decision.THRESHOLD_KEY:
        from server_control.sglang_patch import startup

        startup.warn_limits(dyn)
        if dyn.autotune is not None:  # the operator's N wins: tuning off until asked again
            dyn.autotune.operator_threshold(new)
    return {key: new} if _leaf_known(key) else None


def _set(p: _Patch, controller: Any, recv_req: Any) -> Any:
    keys = getattr(recv_req, "server_args", None) or {}
    dyn = p.dyn(controller)
    gathers = any(k in new_fields() for k in keys) and dyn is not None
    try:
        output = p.set(controller, recv_req)
        overrides.compact()
        metrics.publish()
    except Exception as exc:  # noqa: BLE001 - take part in the gather, then raise
        if not gathers:
            raise
        _check_ranks(dyn, None, exc)
    if gathers:
        _cache(controller).rows = None  # the next /server_info gathers the new values
        output = _check_ranks(dyn, output)
    return output


def _get(p: _Patch, controller: Any, recv_req: Any) -> Any:
    dyn = p.dyn(controller)
    failure: BaseException | None = None
    output = None
    try:
        output = p.get(controller, recv_req)
    except Exception as exc:  # noqa: BLE001 - take part in the gather, then raise
        failure = exc
    tuned = dyn.autotune.applied if dyn is not None and dyn.autotune is not None else 0  # moves: gather anew
    live = _cache(controller).rows_for(dyn, failure, tuned) if dyn is not None else None
    if failure is not None:
        raise failure
    state = getattr(output, "internal_state", None)
    if isinstance(state, dict):
        try:
            _publish(state, dyn, p.why_off(controller), live)
            if live is not None:  # requests since the rows were gathered (0: this one)
                state[decision.STATE_KEY]["ranks_age"] = _cache(controller).age
        except Exception as exc:  # noqa: BLE001 - SGLang's answer still goes out
            state[decision.STATE_KEY] = {"enabled": False, "active": False, "reason": f"cannot publish: {exc!r}"}
    return output


def patch(module: Any, off_reason: str | None = None) -> None:
    cls = module.SchedulerInternalStateController
    if getattr(cls, "_specconsole_patched", False):
        return
    p = _Patch(module, off_reason)

    def __init__(self: Any, scheduler: Any, *args: Any, **kwargs: Any) -> None:
        p.init(self, scheduler, *args, **kwargs)
        if off_reason is None and find(scheduler) is None:
            gate.not_active(_why_absent(scheduler))

    def _update_handlers(self: Any) -> Any:
        handlers = p.handlers(self)
        for key in (*new_fields(), tuner.AUTO_TUNE_KEY):
            handlers[key] = p.handler_cls(
                lambda k, v, _self=self: p.validate(_self, k, v), lambda k, v, _self=self: _apply(_self, k, v)
            )
        return handlers

    def set_internal_state(self: Any, recv_req: Any) -> Any:
        return _set(p, self, recv_req)

    def get_internal_state(self: Any, recv_req: Any) -> Any:
        return _get(p, self, recv_req)

    wrap_methods(
        cls, ((__init__, p.init), (_update_handlers, p.handlers), (get_internal_state, p.get), (set_internal_state, p.set))
    )


def after(module: Any) -> None:
    """``sglang.srt.managers.scheduler_components.internal_state`` imported: patch the
    controller (full mode), or only publish the gate's reason (report mode)."""
    from server_control.sglang_patch import hook

    current = hook.mode()
    if current != hook.OFF:
        patch(module, off_reason=None if current == hook.FULL else hook.gate_reason())
