"""Seeded sampling on the rig (``SPECCONSOLE_RIG_SEEDED_SAMPLING=1``), for the plain and the
patched server alike.

SGLang 0.5.23 draws a token from a request's ``sampling_seed`` and its position (a murmur
hash per row, ``sampler.multinomial_with_seed``, the pytorch backend) only under
``--enable-deterministic-inference``, which refuses the CPU's ``intel_amx`` attention
backend. Its seed tensor is built in ``SamplingBatchInfo.from_schedule_batch`` (every
request's ``sampling_seed``, 42 where a request has none) and is then filtered and merged
with the batch like the temperatures. This hook builds that same tensor without the rest of
deterministic inference, so the sampler itself, SGLang's and the patch's target-only draw
(``sglang_patch/target_only_sampling.py`` passes ``sampling_info.sampling_seed`` on), runs
as written: a test can compare sampled tokens one for one.
"""

from __future__ import annotations

from typing import Any

MODULE = "sglang.srt.sampling.sampling_batch_info"
DEFAULT_SEED = 42  # SGLang's own, for a request without a seed under deterministic inference


def install(module: Any) -> None:
    import torch

    cls = module.SamplingBatchInfo
    orig = cls.from_schedule_batch.__func__

    def from_schedule_batch(klass: Any, batch: Any, vocab_size: int) -> Any:
        info = orig(klass, batch, vocab_size)
        if info.sampling_seed is None:
            seeds = [r.sampling_params.sampling_seed for r in batch.reqs]
            info.sampling_seed = torch.tensor(
                [DEFAULT_SEED if s is None else s for s in seeds], dtype=torch.int64, device=info.temperatures.device
            )
        return info

    cls.from_schedule_batch = classmethod(from_schedule_batch)


AFTER_IMPORT = {MODULE: install}
