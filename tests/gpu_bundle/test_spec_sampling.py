"""The stand-in sampled verify (gpu_bundle/ops/spec_sampling.py) against a loop
transliteration of SGLang's CUDA kernel (``sgl_kernel/speculative/sampling.cuh``,
``TreeSpeculativeSamplingTargetOnly``) on chains (topk 1): the same predictions, accepted
indices, counts and draft-probability writes; and no host read (``meta`` tensors)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.lazy import lazy

if TYPE_CHECKING:
    from torch import Tensor

# imported by the first test that runs, not by every worker that collects this module (tests/support/lazy.py)
torch = lazy("torch")
spec_sampling = lazy("gpu_bundle.ops.spec_sampling")
pytestmark = pytest.mark.xdist_group("torch")  # one worker imports torch for these (tests/conftest.py)


def kernel_reference(predicts, accept_index, accept_num, cand, ridx, nxt, sib, coins, final_coins, target, draft, single, acc_t):
    """One request at a time, as one CUDA block runs it (siblings included)."""
    bs, n = cand.shape
    steps = accept_index.shape[1]
    d = target.shape[-1]
    for b in range(bs):
        prob_acc = 0.0
        offset = b * n  # the row of target/draft probs
        coin = float(coins[b, 0])
        last = int(ridx[b, 0])
        accept_index[b, 0] = last
        accepted = 0
        cur = 0
        for _ in range(1, steps):
            cur = int(nxt[b, cur])
            while cur != -1:
                token = int(cand[b, cur])
                p = float(target[offset, token])
                prob_acc += p
                if p > 0 and (coin < prob_acc / acc_t or p >= single):
                    prob_acc = 0.0
                    offset = b * n + cur
                    coin = float(coins[b, cur])
                    predicts[last] = token
                    accepted += 1
                    accept_index[b, accepted] = int(ridx[b, cur])
                    last = int(ridx[b, cur])
                    break
                draft[offset, token] = target[offset, token]
                cur = int(sib[b, cur])
            if cur == -1:
                break
        accept_num[b] = accepted
        q = target[offset]
        p = draft[offset] if accepted != steps - 1 else torch.zeros_like(q)
        relu = torch.clamp(q - p, min=0)
        u = float(final_coins[b]) * float(relu.sum())
        running, sampled, last_valid = 0.0, d, -1
        for i in range(d):
            x = float(relu[i])
            if x > 0:
                last_valid = i
                running += x
                if running > u:
                    sampled = i
                    break
        if sampled == d:
            sampled = last_valid if last_valid != -1 else d - 1
        predicts[last] = sampled


def _inputs(bs, n, vocab, seed, peaked):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(bs * n, vocab, generator=g) * (6.0 if peaked else 1.0)
    target = torch.softmax(logits, -1)
    # draft tokens: the target's likeliest token at the row before, or a random one
    cand = torch.randint(0, vocab, (bs, n), generator=g)
    ridx = torch.arange(bs * n).view(bs, n)
    for b in range(bs):
        for j in range(1, n):
            if torch.rand(1, generator=g) < 0.7:
                cand[b, j] = int(target[b * n + j - 1].argmax())
    nxt = torch.cat([torch.arange(1, n).repeat(bs, 1), torch.full((bs, 1), -1)], 1)
    sib = torch.full((bs, n), -1)
    coins = torch.rand(bs, n, generator=g)
    final = torch.rand(bs, generator=g)
    return cand, ridx, nxt, sib, coins, final, target


def _run(impl, args, steps, single, acc_t):
    cand, ridx, nxt, sib, coins, final, target = args
    bs, n = cand.shape
    predicts = torch.full((bs * n,), -7, dtype=torch.int32)
    accept_index = torch.full((bs, steps), -1, dtype=torch.int32)
    accept_num = torch.full((bs,), -3, dtype=torch.int32)
    draft = torch.zeros_like(target)
    impl(predicts, accept_index, accept_num, cand, ridx, nxt, sib, coins, final, target.clone(), draft, single, acc_t)
    return predicts, accept_index, accept_num, draft


@pytest.mark.parametrize(
    "bs,n,vocab,seed,peaked,single,acc_t",
    [
        (1, 3, 16, 0, True, 1.0, 1.0),
        (6, 4, 32, 1, True, 1.0, 1.0),
        (5, 5, 64, 2, False, 1.0, 1.0),
        (8, 2, 16, 3, True, 0.5, 1.0),
        (4, 4, 16, 4, False, 1.0, 0.3),
        (3, 1, 8, 5, True, 1.0, 1.0),
    ],
)
def test_the_sampled_verify_matches_the_kernels_semantics(bs, n, vocab, seed, peaked, single, acc_t):
    args = _inputs(bs, n, vocab, seed, peaked)

    def stand_in(*a):
        spec_sampling.tree_speculative_sampling_target_only(*a[:11], threshold_single=a[11], threshold_acc=a[12])

    want = _run(kernel_reference, args, n, single, acc_t)
    got = _run(stand_in, args, n, single, acc_t)
    for w, o in zip(want, got):
        assert o.dtype == w.dtype
        assert torch.equal(o, w), (w, o)
    if bs >= 4 and n > 1 and peaked:
        assert got[2].max() > 0  # some drafts accepted: the walk was exercised


def test_every_draft_accepted_samples_the_bonus_from_the_target_alone():
    bs, n, vocab = 2, 3, 8
    target = torch.zeros(bs * n, vocab)
    target[:, 5] = 1.0  # certain: each draft token 5 accepted, the bonus is 5 too
    cand = torch.full((bs, n), 5)
    args = (
        cand,
        torch.arange(bs * n).view(bs, n),
        torch.cat([torch.arange(1, n).repeat(bs, 1), torch.full((bs, 1), -1)], 1),
        torch.full((bs, n), -1),
        torch.full((bs, n), 0.5),
        torch.full((bs,), 0.5),
        target,
    )
    predicts, accept_index, accept_num, draft = _run(
        lambda *a: spec_sampling.tree_speculative_sampling_target_only(*a), args, n, 1.0, 1.0
    )
    assert accept_num.tolist() == [n - 1, n - 1]
    assert accept_index.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert predicts.tolist() == [5] * (bs * n)
    assert float(draft.abs().sum()) == 0.0


def test_a_rejected_token_is_left_out_of_the_bonus():
    """Draft token 2 has target mass 0.4 and the coin 0.9 rejects it: the bonus comes from
    relu(target - draft) with that token's mass removed, so it is never 2."""
    vocab = 4
    target = torch.tensor([[0.1, 0.1, 0.4, 0.4], [0.25] * 4])
    args = (
        torch.tensor([[0, 2]]),
        torch.tensor([[0, 1]]),
        torch.tensor([[1, -1]]),
        torch.tensor([[-1, -1]]),
        torch.tensor([[0.9, 0.0]]),
        torch.tensor([0.7]),
        target,
    )
    for impl in (kernel_reference, lambda *a: spec_sampling.tree_speculative_sampling_target_only(*a)):
        predicts, accept_index, accept_num, draft = _run(impl, args, 2, 1.0, 1.0)
        assert accept_num.tolist() == [0] and accept_index.tolist() == [[0, -1]]
        assert draft[0].tolist() == [0.0, 0.0, pytest.approx(0.4), 0.0]
        assert int(predicts[0]) == 3 and vocab == 4  # u = 0.7 x 0.6: past 0.1 + 0.1, at token 3


def _meta_args(bs: int, n: int, d: int) -> list[Tensor]:
    """The kernel's 11 tensors on ``meta``: no data, so any host read raises."""
    m = dict(device="meta")
    i32, i64 = dict(dtype=torch.int32, **m), dict(dtype=torch.int64, **m)
    outs = [torch.empty(bs * n, **i32), torch.empty(bs, n, **i32), torch.empty(bs, **i32)]
    tree = [torch.empty(bs, n, **i64) for _ in range(4)]  # candidates, index, next token, sibling
    coins = [torch.empty(bs, n, **m), torch.empty(bs, **m)]
    return [*outs, *tree, *coins, torch.empty(bs * n, d, **m), torch.empty(bs * n, d, **m)]


def test_the_sampled_verify_reads_no_tensor_data_on_the_host():
    spec_sampling.tree_speculative_sampling_target_only(*_meta_args(3, 4, 16))
    with pytest.raises((RuntimeError, NotImplementedError)):  # the control: the loop reads data
        kernel_reference(*_meta_args(3, 4, 16), 1.0, 1.0)
