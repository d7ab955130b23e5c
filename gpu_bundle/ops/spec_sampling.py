"""EAGLE verify with sampling for ``--speculative-eagle-topk 1`` (stand-in, torch only).

SGLang 0.5.23 on CUDA verifies a sampled (temperature > 0) request with a JIT CUDA kernel,
``sglang.kernels.ops.speculative.sampling.tree_speculative_sampling_target_only``, built by
nvcc against FlashInfer's headers, which a bare image does not have: the first sampled
request would end the scheduler. This is that kernel's semantics (SGLang's
``sgl_kernel/speculative/sampling.cuh``) in tensor arithmetic with no host
synchronisation, for a chain (topk 1: every ``retrive_next_sibling`` is -1):

  * walk the chain from the verified token; draft token t is accepted where its target
    probability p > 0 and (coin < p / threshold_acc or p >= threshold_single), the coin
    then moving to t's row; the first rejection ends the walk (no sibling to try), and
    its token's draft probability is set to p;
  * the bonus token is sampled from relu(target - draft) of the last accepted row (the
    draft term left out when every draft token was accepted) with the final coin: the
    first token whose running sum exceeds coin x total, else the last token with mass,
    else the last token.

Tested against a loop transliteration of the CUDA kernel (siblings included) on chains,
and on ``meta`` tensors (no host read). Not SGLang's speed.
"""

from __future__ import annotations

import torch


def tree_speculative_sampling_target_only(
    predicts,
    accept_index,
    accept_token_num,
    candidates,
    retrive_index,
    retrive_next_token,
    retrive_next_sibling,
    uniform_samples,
    uniform_samples_for_final_sampling,
    target_probs,
    draft_probs,
    threshold_single=1.0,
    threshold_acc=1.0,
    deterministic=True,
):
    bs, n = candidates.shape
    steps = accept_index.shape[1]
    d = target_probs.shape[-1]
    device = candidates.device
    tp = target_probs.reshape(bs, n, d)
    dp = draft_probs.view(bs, n, d)
    coins = uniform_samples.reshape(bs, n)
    rows = torch.arange(bs, device=device)
    row = torch.zeros(bs, dtype=torch.long, device=device)  # the last accepted token's row
    coin = coins[:, 0]
    last = retrive_index[:, 0].long()
    accept_index[:, 0] = last.to(accept_index.dtype)
    num = torch.zeros(bs, dtype=torch.long, device=device)
    alive = torch.ones(bs, dtype=torch.bool, device=device)
    for _ in range(1, steps):
        nxt = retrive_next_token.gather(1, row[:, None]).squeeze(1).long()
        alive = alive & (nxt >= 0)
        at = nxt.clamp(min=0)
        token = candidates.gather(1, at[:, None]).squeeze(1).long()
        p = tp[rows, row, token]
        accepted = alive & (p > 0) & ((coin < p / threshold_acc) | (p >= threshold_single))
        rejected = alive & ~accepted
        dp[rows, row, token] = torch.where(rejected, p, dp[rows, row, token])
        predicts[last] = torch.where(accepted, token.to(predicts.dtype), predicts[last])
        draft_index = retrive_index.gather(1, at[:, None]).squeeze(1).long()
        num = num + accepted.long()
        slot = num.clamp(max=steps - 1)
        accept_index[rows, slot] = torch.where(accepted, draft_index.to(accept_index.dtype), accept_index[rows, slot])
        last = torch.where(accepted, draft_index, last)
        coin = torch.where(accepted, coins.gather(1, at[:, None]).squeeze(1), coin)
        row = torch.where(accepted, at, row)
        alive = accepted
    accept_token_num.copy_(num.to(accept_token_num.dtype))
    q = tp[rows, row]
    every = (num == steps - 1)[:, None]
    relu = torch.clamp(q - torch.where(every, torch.zeros_like(q), dp[rows, row]), min=0)
    u = uniform_samples_for_final_sampling.reshape(bs) * relu.sum(-1)
    positive = relu > 0
    crossed = positive & (torch.cumsum(relu, -1) > u[:, None])
    index = torch.arange(d, device=device)
    first = torch.where(crossed, index, torch.full_like(index, d)).amin(-1)
    last_valid = torch.where(positive, index, torch.full_like(index, -1)).amax(-1)
    fallback = torch.where(last_valid >= 0, last_valid, torch.full_like(last_valid, d - 1))
    sampled = torch.where(first < d, first, fallback)
    predicts[last] = sampled.to(predicts.dtype)
