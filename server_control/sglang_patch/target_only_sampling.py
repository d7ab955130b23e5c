"""Target-only steps sample the way a plain server samples, on every platform.

A target-only step is SGLang's steps=0 trivial verify: one token per request, through
``eagle_sample`` (``speculative/eagle_utils.py``), not the plain ``Sampler``. Where
SGLang's ``_verify_uses_greedy`` holds (the CPU, XPU, HIP without rejection sampling: no
speculative sampling kernel there), ``eagle_sample`` commits the ARGMAX even for requests
that ask to sample (temperature > 0): a plain server on the same machine samples them.
So "off" would change the output distribution (measured on the CPU rig, docs/cpu-rig.md).

The fix, for steps=0 verifies only: let ``eagle_sample`` run as written (it applies the
penalties, the logit bias and the grammar mask to the verify logits IN PLACE, exactly the
processing a plain step gets, and returns its one-token tree), then replace each request's
token with one drawn by SGLang's own plain-sampler functions (``sampling_from_probs_torch``
/ ``top_k_top_p_min_p_sampling_from_probs_torch`` on ``softmax(logits / temperature)``:
temperature, top-k, top-p, min-p, the per-request seed), broadcast from TP0 like SGLang's
sampling branch. Greedy requests in a mixed batch keep their argmax (SGLang gives them
top_k = 1). Logprobs are computed after, from the same logits and the token drawn.

Left as SGLang has it: speculative steps (drafts > 1: SGLang's own behaviour, with or
without the patch), all-greedy batches (already argmax everywhere), platforms with a
sampling kernel (the kernel with one node samples the target's distribution), watermarked
batches and ``SGLANG_SIMULATE_ACC_LEN`` runs. A missing anchor leaves SGLang untouched and
logs one warning.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType

from server_control.sglang_patch.sglang_shapes import (
    EagleVerifyInput,
    EagleWorkerCommonModule,
    GroupCoordinator,
    LogitsProcessorOutput,
    SamplingBatchInfo,
    ScheduleBatch,
    Tensor,
)

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")

COMMON = "sglang.srt.speculative.eagle_worker_common"
UTILS = "sglang.srt.speculative.eagle_utils"
SAMPLER = "sglang.srt.layers.sampler"


def _greedy_platform(utils: ModuleType) -> bool:
    """Whether SGLang's verify commits the argmax for sampling requests on this machine."""
    from sglang.srt.runtime_context import get_spec

    try:
        rejection = bool(get_spec().speculative_use_rejection_sampling)
    except Exception:  # noqa: BLE001 - not published (in-process callers): SGLang's default
        rejection = False
    return bool(
        utils._verify_uses_greedy(
            is_all_greedy=False,
            is_cpu=utils._is_cpu,
            is_hip=utils._is_hip,
            is_xpu=utils._is_xpu,
            use_rejection_sampling=rejection,
        )
    )


def wanted(verify_input: EagleVerifyInput, batch: ScheduleBatch, utils: ModuleType, kwargs: dict[str, object]) -> bool:
    info = batch.sampling_info
    if getattr(verify_input, "draft_token_num", None) != 1 or batch.forward_mode.is_idle():
        return False
    if info.is_all_greedy or getattr(utils, "SIMULATE_ACC_LEN", 0) > 0:
        return False
    if kwargs.get("watermark_state") is not None and getattr(info, "has_watermark_candidates", False):
        return False
    return _greedy_platform(utils)


def plain_draw(logits: Tensor, info: SamplingBatchInfo, positions: Tensor, sampler: ModuleType) -> Tensor:
    """One token per row, drawn as SGLang's plain sampler draws it (pytorch backend)."""
    import torch

    probs = torch.softmax(logits / info.temperatures, dim=-1)
    if not (info.need_top_p_sampling or info.need_top_k_sampling or info.need_min_p_sampling):
        return sampler.sampling_from_probs_torch(probs, sampling_seed=info.sampling_seed, positions=positions)
    return sampler.top_k_top_p_min_p_sampling_from_probs_torch(
        probs, info.top_ks, info.top_ps, info.min_ps, info.need_min_p_sampling, info.sampling_seed, positions
    )


def _broadcast(*tensors: Tensor) -> None:
    from sglang.srt.layers.dp_attention import is_dp_attention_enabled
    from sglang.srt.runtime_context import get_parallel

    group: GroupCoordinator = get_parallel().attn_tp_group if is_dp_attention_enabled() else get_parallel().tp_group
    if group.world_size > 1:
        for t in tensors:
            group.broadcast(t, src=0)


def missing() -> str | None:
    """The first anchor this module needs that the loaded SGLang lacks, or None."""
    need = {
        COMMON: ["eagle_sample", "run_eagle_verify"],
        UTILS: ["_verify_uses_greedy", "_is_cpu", "_is_hip", "_is_xpu"],
        SAMPLER: ["sampling_from_probs_torch", "top_k_top_p_min_p_sampling_from_probs_torch"],
    }
    import importlib

    for name, attrs in need.items():
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a module SGLang lacks or cannot import is named, not raised
            return f"{name} ({exc!r})"
        for attr in attrs:
            if not hasattr(module, attr):
                return f"{name}.{attr}"
    return None


def patch() -> None:
    """Wrap ``eagle_worker_common.eagle_sample`` (the name ``run_eagle_verify`` calls)."""
    anchor = missing()
    if anchor is not None:
        logger.warning(f"Dynamic speculation: target-only steps keep SGLang's verify sampling (anchor {anchor} missing)")
        return
    common: EagleWorkerCommonModule = sys.modules[COMMON]
    utils, sampler = sys.modules[UTILS], sys.modules[SAMPLER]
    orig = common.eagle_sample
    if getattr(orig, "_specconsole_patched", False):
        return

    def eagle_sample(
        verify_input: EagleVerifyInput,
        batch: ScheduleBatch,
        logits_output: LogitsProcessorOutput,
        *args: object,
        **kwargs: object,
    ) -> tuple[Tensor, Tensor, Tensor]:
        predict, accept_lens, accept_index = orig(verify_input, batch, logits_output, *args, **kwargs)
        if wanted(verify_input, batch, utils, kwargs):
            drawn = plain_draw(logits_output.next_token_logits, batch.sampling_info, verify_input.positions, sampler)
            predict[accept_index[:, 0].long()] = drawn.to(predict.dtype)
            _broadcast(predict)
        return predict, accept_lens, accept_index

    eagle_sample.__wrapped__ = orig  # type: ignore[attr-defined]
    eagle_sample.__doc__ = orig.__doc__
    eagle_sample._specconsole_patched = True  # type: ignore[attr-defined]
    common.eagle_sample = eagle_sample
