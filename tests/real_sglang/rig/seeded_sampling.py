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

Per request: only a batch with a request that carries a ``sampling_seed`` gets the tensor
(42 for its other requests, as SGLang's); a batch without one is left to SGLang's own
sampler, untouched, so one server serves the seeded tests and the unseeded ones (greedy,
the chi-square samples) alike. A batch merged with a seeded one gets 42s for its requests
(SGLang's merge concatenates the tensors only when both batches have one).
"""

from __future__ import annotations

from typing import Any

MODULE = "sglang.srt.sampling.sampling_batch_info"
DEFAULT_SEED = 42  # SGLang's own, for a request without a seed under deterministic inference


def install(module: Any) -> None:
    import torch

    cls = module.SamplingBatchInfo
    orig = cls.from_schedule_batch.__func__
    orig_merge = cls.merge_batch

    def from_schedule_batch(klass: Any, batch: Any, vocab_size: int) -> Any:
        info = orig(klass, batch, vocab_size)
        seeds = [r.sampling_params.sampling_seed for r in batch.reqs]
        if info.sampling_seed is None and any(s is not None for s in seeds):
            info.sampling_seed = torch.tensor(
                [DEFAULT_SEED if s is None else s for s in seeds], dtype=torch.int64, device=info.temperatures.device
            )
        return info

    def merge_batch(self: Any, other: Any) -> Any:
        for unseeded, seeded in ((self, other), (other, self)):
            if unseeded.sampling_seed is None and seeded.sampling_seed is not None:
                unseeded.sampling_seed = torch.full(
                    (len(unseeded),), DEFAULT_SEED, dtype=torch.int64, device=seeded.sampling_seed.device
                )
        return orig_merge(self, other)

    cls.from_schedule_batch = classmethod(from_schedule_batch)
    cls.merge_batch = merge_batch


AFTER_IMPORT = {MODULE: install}
