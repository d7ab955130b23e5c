"""Faults for the tp 2 rig (test rig only): ``SPECCONSOLE_RIG_TP_FAULTS``, comma-separated.

  * ``barrier``: the steps=0 build starts with a real gloo barrier on the TP CPU group,
    as each CUDA-graph capture of the build does (``barrier()`` per bucket) on a GPU;
  * ``refuse=R``: TP rank R refuses the set-up for a rank-local reason (it will not build);
  * ``fail_build=R``: TP rank R's build raises (after the ranks agreed to build);
  * ``fail_inside=R``: TP rank R's build raises before the ``barrier`` the others enter, so
    they wait in a collective R never joins (a rank failing inside a capture on a GPU);
  * ``no_build_watch``: the build runs without ``build_outcome.BuildWatch`` (the negative
    control: a rank left in the collective is not ended, the failed rank waits for it);
  * ``fail_capture=R``: TP rank R's build raises INSIDE its second CUDA-graph capture (the
    forward run under stream capture, after that shape's two warm-ups with their
    ``barrier()``), as a CUDA OOM during capture would: the backends' ``capture_one`` of
    SGLang wrapped for the build on that rank only, restored after it. GPU only: with
    graphs off nothing is captured, the fault never fires and no ``capture fault
    injected`` line is logged (scripts/gpu-check's check asserts that line);
  * ``old_order``: the order the patch had before: build first, then agree (the negative
    control: a rank that skips the build leaves the others in the barrier);
  * ``verdict_grace=S``: ranks > 0 wait S s (not the patch's 30 s) past the agreement
    timeout for TP0's verdict (the negative control: TP1 goes on sooner).

Every rank logs ``rig tp_faults: agreement returned`` when its agreement ends (the
moment a rank goes on, verdict or none).

Installed by ``preload.py`` in every process of a rig server when the variable is set
(on a GPU by ``tp_faults_preload.py``, named in ``SPECCONSOLE_SGLANG_PRELOAD``); it
replaces functions of the patch's modules (looked up at call time), and SGLang's
``capture_one`` only for ``fail_capture``'s rank and only during its build.
"""

from __future__ import annotations

import logging
import os

ENV = "SPECCONSOLE_RIG_TP_FAULTS"
logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")
REFUSED = "refused on this rank for the test (rig tp_faults)"
CAPTURE_FAULT = "forced by rig tp_faults fail_capture inside a CUDA-graph capture (test only)"
INJECTED = "rig tp_faults: capture fault injected"
CAPTURE_NTH = 2  # the build's second captured shape fails


def _backend_classes() -> list[type]:
    from sglang.srt.model_executor.runner_backend.base_cuda_graph_backend import BaseCudaGraphBackend

    out, todo = [], [BaseCudaGraphBackend]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "capture_one" in cls.__dict__ and not getattr(cls.__dict__["capture_one"], "__isabstractmethod__", False):
            out.append(cls)
    return out


def failing_captures(nth: int = CAPTURE_NTH):
    """A context: while it is open, the ``nth`` ``capture_one`` of SGLang's CUDA-graph
    backends raises from inside the capture (its third forward: the first two are the
    warm-ups). Yields a list that holds INJECTED once the fault fired."""
    import contextlib

    @contextlib.contextmanager
    def scope():
        fired: list[str] = []
        seen = [0]
        saved = {cls: cls.__dict__["capture_one"] for cls in _backend_classes()}

        def wrap(orig):
            def capture_one(self, shape_key, forward_fn, *args, **kwargs):
                seen[0] += 1
                if seen[0] != nth:
                    return orig(self, shape_key, forward_fn, *args, **kwargs)
                calls = [0]

                def forward():
                    calls[0] += 1
                    if calls[0] > 2:  # the warm-ups ran: this one is under stream capture
                        fired.append(INJECTED)
                        logger.info(f"{INJECTED} ({type(self).__name__}, shape {shape_key})")
                        raise RuntimeError(CAPTURE_FAULT)
                    return forward_fn()

                return orig(self, shape_key, forward, *args, **kwargs)

            return capture_one

        for cls, orig in saved.items():
            cls.capture_one = wrap(orig)
        try:
            yield fired
        finally:
            for cls, orig in saved.items():
                cls.capture_one = orig

    return scope()


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


def _wrap_agreement(wanted: dict[str, str]) -> None:
    """``verdict_grace``, the agreement's log line and ``refuse``."""
    from server_control.sglang_patch import rank_agreement, refusals

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


def _wrap_build(wanted: dict[str, str]) -> None:
    """``barrier``, ``fail_build`` and ``fail_capture`` around the steps=0 build."""
    from server_control.sglang_patch import worker

    orig_build = worker.build_states

    def build_states(w, module):
        if "fail_inside" in wanted and str(_tp_rank()) == wanted["fail_inside"]:
            logger.info("rig tp_faults: build failing before the barrier")
            raise RuntimeError("forced by rig tp_faults fail_inside (test only)")
        if "barrier" in wanted:
            import torch.distributed as dist
            from sglang.srt.runtime_context import get_parallel

            logger.info("rig tp_faults: build barrier entered")
            dist.barrier(group=get_parallel().tp_group.cpu_group)
            logger.info("rig tp_faults: build barrier left")
        if "fail_build" in wanted and str(_tp_rank()) == wanted["fail_build"]:
            raise RuntimeError("forced by rig tp_faults fail_build (test only)")
        if "fail_capture" in wanted and str(_tp_rank()) == wanted["fail_capture"]:
            with failing_captures() as fired:
                out = orig_build(w, module)
            if not fired:
                logger.info("rig tp_faults: fail_capture armed, but the build captured no CUDA graph")
            return out
        return orig_build(w, module)

    worker.build_states = build_states


def install() -> None:
    wanted = faults()
    if not wanted:
        return
    from server_control.sglang_patch import rank_agreement, startup

    _wrap_agreement(wanted)
    _wrap_build(wanted)
    if "no_build_watch" in wanted:
        import contextlib

        from server_control.sglang_patch import build_outcome

        build_outcome.watching = lambda dyn: contextlib.nullcontext()  # type: ignore[assignment,return-value]
    if "old_order" in wanted:

        def prepare(w, module, free_before, build_states):
            dyn = w._dynspec
            failure = None
            if dyn.active:
                try:
                    build_states(w, module)
                except Exception as exc:  # noqa: BLE001 - the rig copies the patch: a failed build is settled, never raised
                    failure = f"could not build the target-only (steps=0) runtime state: {exc!r}"
            if rank_agreement.settle(dyn, failure):
                startup.announce(dyn)

        startup.prepare = prepare
