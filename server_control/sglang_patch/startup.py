"""The steps=0 state at start-up: agree first, build only where every rank said yes.

``EAGLEWorkerV2.init_cuda_graphs`` (worker.py) runs SGLang's own graphs, then ``prepare``:

  1. this rank's plan: whether it will build (its set-up refusal, if any) and its free
     memory against an estimate of the steps=0 state (``memory_plan``);
  2. the TP group agrees (``rank_agreement.settle``: the TCPStore, no collective) BEFORE any rank
     builds; unless every rank said yes, no rank builds and every rank logs the same
     ``NOT active`` line naming the ranks and why;
  3. the build (``worker.build_states``), measured (free memory before and after, per
     rank: GPU memory on a GPU, host memory on the CPU);
  4. every rank confirms its build (``build_outcome.confirm_built``; a rank still inside
     its build when another's failed is ended by ``build_outcome.BuildWatch``). A build that fails on one
     rank after the agreement stops the server, with the failure named on every rank
     that gets there: with CUDA graphs the build runs collectives (a ``barrier()`` per
     captured bucket and all-reduces in warm-up), so the other ranks may be waiting in
     one of them and "switch off and serve" would hang. With TP 1 there is no other
     rank: the switch turns off and the server serves.

Which memory: ``reserve.py`` took an estimate (or the operator's figure) out of the KV
budget before the pool was sized (``reserved_gib``); a build that takes more logs a
warning naming the variable to set. ``get_available_gpu_memory`` of SGLang (``torch.cuda.mem_get_info`` on
CUDA, ``psutil`` available host memory on the CPU). The estimate is the memory SGLang's
own ``init_cuda_graphs`` just took (draft and draft-extend graphs of the normal state,
and the adaptive tiers with ``--speculative-adaptive``): the steps=0 state has the same
kinds of runners with fewer draft tokens. A rank whose free memory is below the estimate
says no (``free memory ... below the estimate ...``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import ModuleType

from server_control.protocol import decision, explore
from server_control.sglang_patch import build_outcome, rank_agreement
from server_control.sglang_patch.sglang_shapes import EagleWorkerV2, RankState

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")
GIB = 1024**3

SKIP_DRAFT_EXTEND_WARNING = (
    "Dynamic speculation: SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND is set: draft-extend is "
    "skipped while target-only, so the draft's KV cache has a hole at every position "
    "decoded target-only: an EAGLE-3 draft reads those slots (stale, possibly another "
    "request's data) for the rest of each request. Measured on the CPU rig's trained pair "
    "(docs/cpu-rig.md): accept length 1.00 instead of 3.00 for the 12 steps after "
    "resuming; unset it unless you measure the loss on your model"
)


def free_gib(worker: EagleWorkerV2) -> float | None:
    """This rank's free device memory (GiB; host memory on the CPU), or None."""
    try:
        from sglang.srt.utils.common import get_available_gpu_memory

        return float(get_available_gpu_memory(worker.device, worker.gpu_id, empty_cache=False))
    except Exception:  # noqa: BLE001 - a platform without the query
        return None


def memory_plan(free_before: float | None, free_now: float | None) -> dict[str, float | None]:
    """The rank's memory facts before the build: what SGLang's own graphs took (the
    estimate of the steps=0 state) and what is free now."""
    estimate = None
    if free_before is not None and free_now is not None:
        estimate = round(max(0.0, free_before - free_now), 3)
    from server_control.sglang_patch import reserve

    return {
        "free_gib": None if free_now is None else round(free_now, 3),
        "estimate_gib": estimate,
        "reserved_gib": reserve.reserved_gib(),
    }


def memory_refusal(plan: dict[str, float | None]) -> str | None:
    free, estimate = plan.get("free_gib"), plan.get("estimate_gib")
    if free is not None and estimate is not None and free < estimate:
        return (
            f"free memory {free:.2f} GiB is below the estimate {estimate:.2f} GiB of the "
            "target-only (steps=0) state (the memory SGLang's own speculative graphs took)"
        )
    return None


def over_reserve(used: float, reserved: float | None) -> str | None:
    """The warning when the build took more than was taken out of the KV budget."""
    from server_control.sglang_patch import reserve

    if reserved is None or used <= reserved:
        return None
    return (
        f"Dynamic speculation: the target-only (steps=0) state took {used:.3f} GiB, more "
        f"than the {reserved:.3f} GiB taken out of the KV cache budget; the difference "
        f"comes out of SGLang's activation headroom: set {reserve.RESERVE_ENV}={used:.2f} "
        "(or more) on this server"
    )


def server_limits() -> dict[str, int | None]:
    """The effective caps N is measured against: ``max_running_requests`` (after SGLang's
    resolution: 48 for an EAGLE server unless set, ``arg_groups/speculative_hook.py``) and
    the largest decode CUDA-graph bucket (None with decode graphs off)."""
    from sglang.srt.model_executor.cuda_graph_config import (
        Backend,
        Phase,
        check_cuda_graph_backend,
    )
    from sglang.srt.runtime_context import get_exec, get_schedule

    running = get_schedule().max_running_requests
    max_bs = None
    if not check_cuda_graph_backend(Phase.DECODE, Backend.DISABLED):
        max_bs = get_exec().graph.cuda_graph_config.decode.max_bs
    return {
        "max_running_requests": running if isinstance(running, int) else None,
        "cuda_graph_max_bs": max_bs if isinstance(max_bs, int) else None,
    }


def warn_limits(dyn: RankState) -> None:
    """Log why N cannot work as asked on this server (start-up and each runtime change)."""
    if dyn.switch is None or not dyn.limits:
        return
    for line in decision.limit_warnings(
        dyn.switch.threshold, dyn.limits.get("max_running_requests"), dyn.limits.get("cuda_graph_max_bs")
    ):
        logger.warning(f"Dynamic speculation: {line}")


def prepare(
    worker: EagleWorkerV2,
    module: ModuleType,
    free_before: float | None,
    build_states: Callable[[EagleWorkerV2, ModuleType], None],
) -> None:
    """After SGLang's ``init_cuda_graphs``: agree, then build (``build_states(worker, module)``,
    worker.py's) where every rank said yes."""
    dyn = worker._dynspec
    plan = memory_plan(free_before, free_gib(worker))
    refusal = memory_refusal(plan) if dyn.active else None
    if not rank_agreement.settle(dyn, refusal, memory=plan):
        return
    before = free_gib(worker)
    failure = None
    try:
        with build_outcome.watching(dyn):  # ends this rank if another's build fails while it is stuck in one
            build_states(worker, module)
    except Exception as exc:  # noqa: BLE001 - named below, on every rank
        failure = f"could not build the target-only (steps=0) runtime state: {exc!r}"
    after = free_gib(worker)
    used = None if before is None or after is None else round(before - after, 3)
    dyn.state_memory = dict(plan, used_gib=used)
    if failure is not None and rank_agreement.tp_group() is None:
        dyn.deactivate(failure)  # one rank: nobody waits in a collective of the build
        return
    build_outcome.confirm_built(dyn, failure)  # raises BuildFailed when any rank failed
    if used is not None:
        logger.info(
            f"Dynamic speculation: target-only (steps=0) state took {used:.3f} GiB "
            f"(estimate {plan['estimate_gib']} GiB, free before {before:.2f} GiB, "
            f"reserved {plan['reserved_gib']} GiB)"
        )
        over = over_reserve(used, plan.get("reserved_gib"))
        if over is not None:
            logger.warning(over)
    announce(dyn)
    try:
        dyn.limits = server_limits()
    except Exception as exc:  # noqa: BLE001 - an anchor moved: say so, keep serving
        logger.warning(f"Dynamic speculation: cannot read max_running_requests / cuda_graph_max_bs ({exc!r})")
    warn_limits(dyn)


def announce(dyn: RankState) -> None:
    """The start-up lines of a rank whose switch is ready (after the ranks agreed)."""
    switch = dyn.switch
    if switch is None:  # not active: its NOT active line was logged instead
        return
    if switch.threshold > 0:
        logger.info(decision.init_line(switch.threshold, switch.hysteresis, switch.min_dwell_steps))
    else:
        logger.info("Dynamic speculation: ready, threshold=0 (never disable); settable at runtime via /set_internal_state")
    if switch.force != decision.AUTO:
        logger.info(f"Dynamic speculation: force mode set to {switch.force}")
    if dyn.explorer.share:
        logger.info(
            f"Dynamic speculation: exploration share {dyn.explorer.share:g} (the other mode now and then "
            f"at batches within {explore.window(switch.threshold)} of the threshold)"
        )
    if dyn.autotune is not None:
        logger.info(dyn.autotune.start_line())
    if os.environ.get("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", "").lower() in ("1", "true", "yes"):
        logger.warning(SKIP_DRAFT_EXTEND_WARNING)
    logger.info("Dynamic speculation: target-only runtime state ready (speculative_num_steps=0, draft-extend kept)")
