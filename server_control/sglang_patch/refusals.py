"""What the steps=0 target-only state cannot serve: the set-ups SGLang refuses for its own
runtime-state swap (``--speculative-adaptive``), since the patch swaps states with the
same machinery (``build_adaptive_runtime_state`` / ``apply_runtime_state``).

Each check names the SGLang code that refuses the same thing for adaptive speculation;
the first that applies is the reason in the ``NOT active`` line and in ``/server_info``.
Runs in the worker's ``__init__`` (after SGLang's own), on every rank.
"""

from __future__ import annotations

import os

from server_control.sglang_patch.sglang_shapes import EagleWorkerV2


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def reserve_refused() -> str | None:
    """The memory for the steps=0 state could not be taken out of the KV budget before the
    pool was sized (a bad ``SPECCONSOLE_DYNSPEC_RESERVE_GIB``, or ranks that would take
    different amounts: reserve_agreement.py): building it now would come out of SGLang's
    own headroom, or leave the ranks' pools of different sizes."""
    from server_control.sglang_patch import reserve

    return reserve.refused()


def worker_class(worker: object, worker_cls: type) -> str | None:
    if type(worker) is not worker_cls:
        return (
            f"speculative worker {type(worker).__name__} is not EAGLEWorkerV2 "
            "(only EAGLE/EAGLE3 on the standard worker have the steps=0 target-only path)"
        )
    return None


def adaptive_machinery(server_args: object) -> str | None:
    """SGLang's own list (``adaptive_spec_params.adaptive_unsupported_reason``): EAGLE/EAGLE3,
    built-in worker, topk == 1, no attention DP, no multi-layer EAGLE, no TBO, no PDMux."""
    from sglang.srt.speculative.adaptive_spec_params import adaptive_unsupported_reason

    why: str | None = adaptive_unsupported_reason(server_args)
    return why


def lora(server_args: object) -> str | None:
    """``arg_groups/lora_hook.py`` refuses LoRA with --speculative-adaptive."""
    from sglang.srt.arg_groups.overrides import resolving_view

    cfg = resolving_view(server_args)
    enabled = getattr(cfg, "enable_lora", None)
    if enabled or (enabled is None and getattr(cfg, "lora_paths", None)):
        return (
            "LoRA is enabled: the runtime-state swap does not rebuild LoRA CUDA-graph "
            "metadata (SGLang refuses --speculative-adaptive with LoRA for the same "
            "reason, arg_groups/lora_hook.py)"
        )
    return None


def hisparse(server_args: object) -> str | None:
    """``arg_groups/hisparse_hook.py`` refuses HiSparse with --speculative-adaptive."""
    from sglang.srt.arg_groups.overrides import resolving_view

    if getattr(resolving_view(server_args), "enable_hisparse", False):
        return (
            "HiSparse (--enable-hisparse) speculative decoding uses statically sized swap "
            "state (SGLang refuses --speculative-adaptive with it, arg_groups/hisparse_hook.py)"
        )
    return None


def pipeline(worker: EagleWorkerV2) -> str | None:
    """Only the last PP stage hosts the draft; ``arg_groups/validation_hook.py`` refuses
    SGLANG_ENABLE_PP_SPEC with --speculative-adaptive (the PP relay slices results with
    the configured draft-token count)."""
    from sglang.srt.runtime_context import get_parallel

    pp = get_parallel().pp_size
    if pp > 1 and _env_on("SGLANG_ENABLE_PP_SPEC"):
        return (
            f"pipeline parallelism (pp_size={pp}) with SGLANG_ENABLE_PP_SPEC: the PP relay "
            "slices results with the configured draft-token count (SGLang refuses it with "
            "--speculative-adaptive, arg_groups/validation_hook.py)"
        )
    if pp > 1 or not getattr(worker, "_hosts_draft", True) or worker._draft_worker is None:
        return f"pipeline parallelism (pp_size={pp}) is not supported (only the last stage hosts the draft model)"
    return None


def qsa_index_share(worker: EagleWorkerV2) -> str | None:
    """``speculative/eagle_worker_v2.py`` (``_configure_qsa_mtp_index_share``) turns QSA MTP
    index sharing off under --speculative-adaptive: the shared index buffers belong to one
    runtime state. Here SGLang has already turned it on, so the swap would break it."""
    dw = worker._draft_worker
    backend = getattr(dw, "draft_extend_attn_backend", None)
    if getattr(backend, "_mtp_shared_sparse_indices", None) is not None:
        return (
            "QSA MTP index sharing (index_share_for_mtp_iteration) is on: its index "
            "buffers belong to one runtime state (SGLang turns it off under "
            "--speculative-adaptive, speculative/eagle_worker_v2.py)"
        )
    return None


def disaggregation() -> str | None:
    """A PD-disaggregation decode server settles its first token through
    ``process_batch_result_prebuilt`` (the prefill server's result), a path the patch's
    per-mode accounting and the TP agreement were never run on: refused, not untested. A
    prefill server never decodes: the state would be memory for nothing."""
    from sglang.srt.runtime_context import get_disagg

    mode = getattr(get_disagg(), "disaggregation_mode", None)
    if mode == "decode":
        return (
            "PD disaggregation decode server (--disaggregation-mode decode): its results "
            "arrive through process_batch_result_prebuilt, which the patch does not "
            "cover (not tested)"
        )
    if mode == "prefill":
        return (
            "PD disaggregation prefill server (--disaggregation-mode prefill): it never "
            "decodes, so a target-only state would only take memory"
        )
    return None


def before_pool(server_args: object) -> str | None:
    """The refusals the configuration alone decides, so the KV pool is sized without the
    state's reserve when the switch will be refused (reserve.py; the worker's refusals
    come later and say the same)."""
    from sglang.srt.runtime_context import get_parallel

    pp = get_parallel().pp_size
    return (
        adaptive_machinery(server_args)
        or lora(server_args)
        or hisparse(server_args)
        or (f"pipeline parallelism (pp_size={pp}) is not supported" if pp > 1 else None)
        or disaggregation()
    )


def reason(worker: EagleWorkerV2, server_args: object, worker_cls: type) -> str | None:
    """Why the steps=0 target-only path cannot serve this set-up, or None."""
    return (
        worker_class(worker, worker_cls)
        or adaptive_machinery(server_args)
        or lora(server_args)
        or hisparse(server_args)
        or pipeline(worker)
        or qsa_index_share(worker)
        or disaggregation()
        or reserve_refused()
    )
