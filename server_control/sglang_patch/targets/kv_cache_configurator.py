"""``sglang.srt.mem_cache.kv_cache_configurator``: take the steps=0 state's memory out of
the target's KV budget before the pool is sized (reserve.py). Full mode only, EAGLE /
EAGLE3 servers only (the switch can be turned on at runtime, so the reserve does not
depend on the threshold), the target's configurator only, once per process; nothing when
the configuration alone refuses the switch (``refusals.before_pool``) or SGLang's adaptive
controller builds the steps=0 state that the switch then reuses. Every rank takes the figure
only when all report the same (reserve_agreement.py); otherwise none does and the switch
is off on every rank (``reserve.refuse``)."""

from __future__ import annotations

import logging
from types import ModuleType

from server_control.sglang_patch import gate, hook, refusals, reserve, reserve_agreement
from server_control.sglang_patch.reserve_agreement import Figure
from server_control.sglang_patch.sglang_shapes import KVCacheConfigurator
from server_control.sglang_patch.wrapping import wrap_methods

logger = logging.getLogger("sglang.srt.mem_cache.kv_cache_configurator")


def after(module: ModuleType) -> None:
    if hook.mode() != hook.FULL:
        return
    cls = module.KVCacheConfigurator
    if getattr(cls, "_specconsole_patched", False):
        return
    orig = cls._profile_available_bytes

    def _profile_available_bytes(self: KVCacheConfigurator, pre_model_load_memory: int) -> int:
        available: int = orig(self, pre_model_load_memory)
        if self.is_draft_worker or reserve.reserved_gib() is not None or reserve.refused() is not None or not _eagle(self):
            return available
        mine, failure = _figure(self)
        verdict = reserve_agreement.settle(mine)  # every rank that sizes a pool: the same figure or none
        reason = failure or verdict.reason
        if reason is not None:
            reserve.refuse(reason)
            gate.not_active(reason)
            return available
        if mine.source.startswith(NONE):
            logger.info(f"Dynamic speculation: nothing taken out of the KV cache budget: {mine.source[len(NONE) :]}")
            return available
        every = f", the same on all {verdict.ranks} ranks" if verdict.ranks > 1 else ""
        logger.info(
            f"Dynamic speculation: {verdict.gib:.3f} GiB taken out of the KV cache budget for the target-only "
            f"(steps=0) state ({mine.source}{every})"
        )
        return reserve.take(available, verdict.gib)

    wrap_methods(cls, ((_profile_available_bytes, orig),))


NONE = "none: "  # a figure's source when this rank takes nothing for a reason of the set-up
FAILED = "failed: "


def _figure(configurator: KVCacheConfigurator) -> tuple[Figure, str | None]:
    """This rank's reserve and where it comes from, and why it cannot be had (None: it can)."""
    try:
        why = refusals.before_pool(configurator.server_args) or _reused(configurator.server_args)
        if why:
            return Figure(0.0, NONE + why), None
        gib = reserve.operator_gib()
        if gib is not None:
            return Figure(gib, reserve.RESERVE_ENV), None
        return Figure(_estimate(configurator), "estimate"), None
    except Exception as exc:  # noqa: BLE001 - the pool is sized as SGLang would, the switch off
        return Figure(0.0, f"{FAILED}{exc}"), f"cannot reserve the target-only state's memory: {exc}"


def _reused(server_args: object) -> str | None:
    """SGLang's adaptive controller with steps 0 among its candidates builds a steps=0
    state of its own, which the switch reuses (worker.build_states): nothing new to hold."""
    if not getattr(server_args, "speculative_adaptive", False):
        return None
    from sglang.srt.speculative.adaptive_spec_params import resolve_candidate_steps_from_config

    if 0 in resolve_candidate_steps_from_config(getattr(server_args, "speculative_adaptive_config", None)):
        return "SGLang's adaptive controller builds the steps=0 state itself (reused, not rebuilt)"
    return None


def _eagle(configurator: KVCacheConfigurator) -> bool:
    return getattr(configurator.spec_algorithm, "name", None) in ("EAGLE", "EAGLE3")


def _estimate(configurator: KVCacheConfigurator) -> float:
    from sglang.srt.model_executor.cuda_graph_config import (
        Backend,
        Phase,
        check_cuda_graph_backend,
    )
    from sglang.srt.runtime_context import get_exec, get_schedule

    config = get_exec().graph.cuda_graph_config
    graphs = config is not None and not check_cuda_graph_backend(Phase.DECODE, Backend.DISABLED)
    bs: object = config.decode.max_bs if graphs else None
    if not isinstance(bs, int):
        running = get_schedule().max_running_requests
        bs = running if isinstance(running, int) else 48
    mc = configurator.model_config
    text = mc.hf_text_config
    hidden = getattr(mc, "hidden_size", None) or getattr(text, "hidden_size", 0)
    vocab = getattr(mc, "vocab_size", None) or getattr(text, "vocab_size", 0)
    return reserve.estimate_gib(
        bs,
        int(mc.context_len),
        int(configurator.page_size or 1),
        int(vocab or 0),
        int(hidden or 0),
        graphs,
        attention=_attention_backends(),
        deterministic=bool(getattr(getattr(get_exec(), "deterministic", None), "enable_deterministic_inference", False)),
    )


def _attention_backends() -> tuple[str | None, ...]:
    """SGLang's resolved (prefill, decode) attention backends (None where unset)."""
    from sglang.srt.runtime_context import attention_backends

    return tuple(attention_backends())
