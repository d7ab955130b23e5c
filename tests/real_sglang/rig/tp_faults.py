"""Faults for the tp 2 rig (test rig only): ``SPECCONSOLE_RIG_TP_FAULTS``, comma-separated.

  * ``barrier``: the steps=0 build starts with a real gloo barrier on the TP CPU group,
    as each CUDA-graph capture of the build does (``barrier()`` per bucket) on a GPU;
  * ``refuse=R``: TP rank R refuses the set-up for a rank-local reason (it will not build);
  * ``fail_build=R``: TP rank R's build raises (after the ranks agreed to build);
  * ``old_order``: the order the patch had before: build first, then agree (the negative
    control: a rank that skips the build leaves the others in the barrier);
  * ``verdict_grace=S``: ranks > 0 wait S s (not the patch's 30 s) past the agreement
    timeout for TP0's verdict (the negative control: TP1 goes on sooner).

Every rank logs ``rig tp_faults: agreement returned`` when its agreement ends (the
moment a rank goes on, verdict or none).

Installed by ``preload.py`` in every process of a rig server when the variable is set;
it replaces functions of the patch's modules (looked up at call time), never SGLang's.
"""

from __future__ import annotations

import logging
import os

ENV = "SPECCONSOLE_RIG_TP_FAULTS"
logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")
REFUSED = "refused on this rank for the test (rig tp_faults)"


def faults() -> dict[str, str]:
    out = {}
    for part in os.environ.get(ENV, "").split(","):
        key, _, value = part.strip().partition("=")
        if key:
            out[key] = value
    return out


def _tp_rank() -> int:
    from sglang.srt.runtime_context import get_parallel

    return int(get_parallel().tp_rank)


def install() -> None:
    wanted = faults()
    if not wanted:
        return
    from server_control.sglang_patch import rank_agreement, refusals, startup, worker

    if "verdict_grace" in wanted:
        rank_agreement.VERDICT_GRACE_S = float(wanted["verdict_grace"])
    orig_agree = rank_agreement.agree

    def agree(*args, **kwargs):
        verdict = orig_agree(*args, **kwargs)
        logger.info(f"rig tp_faults: agreement returned: agreed={verdict.agreed} ({verdict.reason})")
        return verdict

    rank_agreement.agree = agree

    if "refuse" in wanted:
        orig_reason = refusals.reason

        def reason(w, server_args, worker_cls):
            if str(_tp_rank()) == wanted["refuse"]:
                return REFUSED
            return orig_reason(w, server_args, worker_cls)

        refusals.reason = reason

    orig_build = worker.build_states

    def build_states(w, module):
        if "barrier" in wanted:
            import torch.distributed as dist
            from sglang.srt.runtime_context import get_parallel

            logger.info("rig tp_faults: build barrier entered")
            dist.barrier(group=get_parallel().tp_group.cpu_group)
            logger.info("rig tp_faults: build barrier left")
        if "fail_build" in wanted and str(_tp_rank()) == wanted["fail_build"]:
            raise RuntimeError("forced by rig tp_faults fail_build (test only)")
        return orig_build(w, module)

    worker.build_states = build_states

    if "old_order" in wanted:

        def prepare(w, module, free_before):
            dyn = w._dynspec
            failure = None
            if dyn.active:
                try:
                    worker.build_states(w, module)
                except Exception as exc:  # noqa: BLE001
                    failure = f"could not build the target-only (steps=0) runtime state: {exc!r}"
            if rank_agreement.settle(dyn, failure):
                worker.announce(dyn)

        startup.prepare = prepare
