"""Let SGLang's overlap scheduler run speculative decoding on this CPU (test rig only).

Opt-in, with ``SPECCONSOLE_RIG_OVERLAP=1`` in the server environment (``rig_env_vars(...,
overlap=True)``) and without ``--disable-overlap-schedule``. Two things stop it in
sglang 0.5.23, and the preload replaces both in the process that imports them:

1. ``sglang.srt.arg_groups.speculative_hook._disable_overlap_schedule_for_cpu`` turns
   overlap off for EAGLE on ``--device cpu`` ("Overlap schedule is not implemented for
   speculative decoding on CPU"). Replaced by a no-op (main process, where the server
   arguments are resolved).
2. The overlap ``FutureMap`` resolves each step's draft inputs with
   ``gather_spec_extras`` (``sglang.kernels.ops.speculative.gather_spec_extras``), a
   Triton kernel: Triton has no CPU driver here ("0 active drivers"). Replaced, in
   ``sglang.srt.managers.overlap_utils`` (scheduler processes), by the same row gather in
   plain torch (``gather_spec_extras`` below).
Everything else of the overlap event loop (``torch.cpu`` streams and events, the future
map, the one-step-late result processing) runs as SGLang wrote it.
"""

from __future__ import annotations

import os

ENV = "SPECCONSOLE_RIG_OVERLAP"
HOOK_MODULE = "sglang.srt.arg_groups.speculative_hook"
OVERLAP_MODULE = "sglang.srt.managers.overlap_utils"


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def gather_spec_extras(indices, topk_p_buf, topk_index_buf, output_tokens_buf, hidden_states_buf):
    """Rows ``indices`` of each buffer (hidden states optional), as fresh tensors: what the
    Triton ``_gather_rows_kernel`` writes."""
    idx = indices.reshape(-1).long()
    return (
        topk_p_buf[idx],
        topk_index_buf[idx],
        output_tokens_buf[idx],
        None if hidden_states_buf is None else hidden_states_buf[idx],
    )


def _keep_overlap(server_args) -> None:
    """Stands in for ``_disable_overlap_schedule_for_cpu``: leaves the choice to the flag."""


def patch_hook(module) -> None:
    module._disable_overlap_schedule_for_cpu = _keep_overlap


def patch_overlap_utils(module) -> None:
    module.gather_spec_extras = gather_spec_extras


AFTER_IMPORT = {HOOK_MODULE: patch_hook, OVERLAP_MODULE: patch_overlap_utils}
