"""The stand-in sgl-kernel operators of gpu_bundle/ops against references, on CPU tensors:
shape, dtype, in-place effects, values; and no host read of tensor data (each op also runs
on ``meta`` tensors, where ``.item()``/``.tolist()``/``nonzero`` raise), which is what
CUDA-graph capture needs."""

from __future__ import annotations

import pytest

from tests.support.lazy import lazy

# imported by the first test that runs, not by every worker that collects this module (tests/support/lazy.py)
torch = lazy("torch")
F = lazy("torch.nn.functional")
ew = lazy("gpu_bundle.ops.elementwise")
sampling = lazy("gpu_bundle.ops.sampling")
spec_tree = lazy("gpu_bundle.ops.spec_tree")
ref = lazy("tests.real_sglang.rig.spec_ops")
pytestmark = pytest.mark.xdist_group("torch")  # one worker imports torch for these (tests/conftest.py)


def _x(*shape, dtype=None, seed=0):
    dtype = torch.float32 if dtype is None else dtype
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_rmsnorm_matches_torch_and_writes_out(dtype_name):
    dtype = getattr(torch, dtype_name)
    x, w = _x(5, 64, dtype=dtype), _x(64, dtype=dtype, seed=1)
    want = F.rms_norm(x.float(), (64,), w.float(), eps=1e-6).to(dtype)
    got = ew.rmsnorm(x, w, 1e-6)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got, want)
    out = torch.empty_like(x)
    assert ew.rmsnorm(x, w, 1e-6, out=out) is out
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(ew.gemma_rmsnorm(x, w, 1e-6), F.rms_norm(x.float(), (64,), 1 + w.float(), eps=1e-6).to(dtype))


def test_fused_add_rmsnorm_in_place():
    x, r, w = _x(4, 32), _x(4, 32, seed=2), _x(32, seed=3)
    x0, r0 = x.clone(), r.clone()
    assert ew.fused_add_rmsnorm(x, r, w, 1e-5) is None
    torch.testing.assert_close(r, x0 + r0)
    torch.testing.assert_close(x, F.rms_norm(x0 + r0, (32,), w, eps=1e-5))
    x, r = x0.clone(), r0.clone()
    ew.gemma_fused_add_rmsnorm(x, r, w, 1e-5)
    torch.testing.assert_close(x, F.rms_norm(x0 + r0, (32,), 1 + w, eps=1e-5))


@pytest.mark.parametrize(
    "name,act",
    [
        ("silu_and_mul", lambda t: F.silu(t)),
        ("gelu_and_mul", lambda t: F.gelu(t)),
        ("gelu_tanh_and_mul", lambda t: F.gelu(t, approximate="tanh")),
    ],
)
def test_gated_activations(name, act):
    x = _x(3, 2, 16)
    want = act(x[..., :8]) * x[..., 8:]
    got = getattr(ew, name)(x)
    assert got.shape == (3, 2, 8)
    torch.testing.assert_close(got, want)
    out = torch.full((3, 2, 8), 7.0)
    assert getattr(ew, name)(x, out) is out
    torch.testing.assert_close(out, want)
    with pytest.raises(ValueError, match="shape"):
        getattr(ew, name)(x, torch.empty(3, 8))


def test_gelu_quick():
    x = _x(4, 8)
    torch.testing.assert_close(ew.gelu_quick(x), x * torch.sigmoid(1.702 * x))


def _rope_reference(pos, x, head, cache, neox):
    """Complex-number rotation, independent of the stand-in's formula."""
    rot = cache.shape[1]
    cos, sin = cache[pos, : rot // 2], cache[pos, rot // 2 :]
    v = x.view(x.shape[0], -1, head).clone()
    part = v[..., :rot]
    if neox:
        re, im = part[..., : rot // 2], part[..., rot // 2 :]
    else:
        re, im = part[..., 0::2], part[..., 1::2]
    z = torch.complex(re, im) * torch.complex(cos, sin).unsqueeze(1)
    if neox:
        v[..., :rot] = torch.cat([z.real, z.imag], dim=-1)
    else:
        v[..., :rot] = torch.stack([z.real, z.imag], dim=-1).flatten(-2)
    return v.view_as(x)


@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("rot", [16, 8])
def test_rotary_embedding_in_place(neox, rot):
    head, heads, kv_heads, tokens = 16, 4, 2, 6
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2).float() / rot))
    freqs = torch.outer(torch.arange(64).float(), inv)
    cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1)
    pos = torch.tensor([0, 3, 7, 7, 20, 63])
    q, k = _x(tokens, heads * head), _x(tokens, kv_heads, head, seed=4)
    want_q, want_k = _rope_reference(pos, q, head, cache, neox), _rope_reference(pos, k, head, cache, neox)
    assert ew.rotary_embedding(pos, q, k, head, cache, neox) is None
    torch.testing.assert_close(q, want_q)
    torch.testing.assert_close(k, want_k)


def test_renorm_probs():
    probs = torch.softmax(_x(3, 10), dim=-1)
    top = sampling.top_k_renorm_prob(probs, 3)
    assert ((top > 0).sum(-1) == 3).all()
    torch.testing.assert_close(top.sum(-1), torch.ones(3))
    kept = probs.topk(3).indices
    torch.testing.assert_close(top.gather(-1, kept), probs.gather(-1, kept) / probs.gather(-1, kept).sum(-1, keepdim=True))
    nuc = sampling.top_p_renorm_prob(probs, torch.tensor([0.0, 0.5, 1.0]))
    assert (nuc[0] > 0).sum() == 1 and (nuc[2] > 0).sum() == 10
    torch.testing.assert_close(nuc.sum(-1), torch.ones(3))


# -- EAGLE tree, topk 1: against the rig's loop version of the CUDA kernels' semantics --


def _tree_inputs(bs, steps, seed):
    """What SGLang's organize_draft_results hands build_tree for topk 1 (a chain)."""
    g = torch.Generator().manual_seed(seed)
    n = steps + 1
    seq = torch.randint(3, 20, (bs,), generator=g)
    parent_list = torch.cat([torch.full((bs, 1), -1), torch.arange(steps).repeat(bs, 1)], 1)[:, :steps]
    selected = torch.arange(n - 1).repeat(bs, 1)
    return n, seq, parent_list.long(), selected.long()


def _tree_outputs(bs, n, seq, mode):
    size = int(((seq + n) * n).sum()) if mode == spec_tree.FULL_MASK else bs * n * n
    mask = torch.ones(size, dtype=torch.bool)  # FULL_MASK: the prefix columns pre-filled True
    return (
        mask,
        torch.zeros(bs * n, dtype=torch.int64),
        torch.zeros(bs, n, dtype=torch.int64),
        torch.full((bs, n), -1, dtype=torch.int64),
        torch.full((bs, n), -1, dtype=torch.int64),
    )


@pytest.mark.parametrize("mode_name", ["FULL_MASK", "QLEN_ONLY"])
@pytest.mark.parametrize("bs,steps", [(1, 2), (4, 2), (3, 4), (2, 1)])
def test_build_tree_matches_reference(mode_name, bs, steps):
    mode = getattr(spec_tree, mode_name)
    n, seq, parents, sel = _tree_inputs(bs, steps, seed=bs * 10 + steps)
    want, got = _tree_outputs(bs, n, seq, mode), _tree_outputs(bs, n, seq, mode)
    ref.build_tree_kernel_efficient(parents, sel, seq, *want, 1, steps, n, mode)
    spec_tree.build_tree_kernel_efficient(parents, sel, seq, *got, 1, steps, n, mode)
    for w, o in zip(want, got):
        assert o.dtype == w.dtype and o.shape == w.shape
        assert torch.equal(o, w)


def test_build_tree_refuses_topk_above_one():
    n, seq, parents, sel = _tree_inputs(2, 2, 0)
    with pytest.raises(NotImplementedError, match="topk 1"):
        spec_tree.build_tree_kernel_efficient(parents, sel, seq, *_tree_outputs(2, n, seq, 0), 2, 2, n, 0)


def _verify_inputs(bs, n, seed, vocab=4):
    g = torch.Generator().manual_seed(seed)
    cand = torch.randint(0, vocab, (bs, n), generator=g)
    ridx = torch.arange(bs * n).view(bs, n)
    nxt = torch.cat([torch.arange(1, n).repeat(bs, 1), torch.full((bs, 1), -1)], 1)
    sib = torch.full((bs, n), -1)
    target = torch.randint(0, vocab, (bs * n,), generator=g)
    # make some drafts right: draft j = target at j-1 for a random prefix of j
    for b in range(bs):
        right = int(torch.randint(0, n, (1,), generator=g))
        for j in range(1, right + 1):
            cand[b, j] = target[ridx[b, j - 1]]
    return cand, ridx, nxt, sib, target


@pytest.mark.parametrize("bs,n,seed", [(1, 3, 0), (6, 3, 1), (5, 5, 2), (8, 2, 3), (3, 1, 4)])
def test_verify_tree_greedy_matches_reference(bs, n, seed):
    cand, ridx, nxt, sib, target = _verify_inputs(bs, n, seed)
    outs = []
    for impl in (ref.verify_tree_greedy, spec_tree.verify_tree_greedy):
        predicts = torch.full((bs * n,), -7, dtype=torch.int32)
        accept_index = torch.full((bs, n), -1, dtype=torch.int32)
        accept_num = torch.full((bs,), -3, dtype=torch.int32)
        impl(predicts, accept_index, accept_num, cand, ridx, nxt, sib, target)
        outs.append((predicts, accept_index, accept_num))
    for w, o in zip(*outs):
        assert o.dtype == w.dtype
        assert torch.equal(o, w), (w, o)
    assert n == 1 or outs[1][2].max() > 0  # some drafts accepted (none can be with n 1)


def test_ops_read_no_tensor_data_on_the_host():
    """Meta tensors have no data: an op that syncs (``.item()``, ``.tolist()``, boolean
    indexing) raises on them, as it would break CUDA-graph capture."""
    m = dict(device="meta")
    x, w = torch.empty(4, 32, **m), torch.empty(32, **m)
    ew.rmsnorm(x, w)
    ew.fused_add_rmsnorm(x, torch.empty(4, 32, **m), w)
    ew.silu_and_mul(torch.empty(4, 64, **m), torch.empty(4, 32, **m))
    ew.rotary_embedding(
        torch.zeros(4, dtype=torch.int64, **m),
        torch.empty(4, 64, **m),
        torch.empty(4, 32, **m),
        16,
        torch.empty(64, 16, **m),
        True,
    )
    bs, n = 3, 3
    seq = torch.zeros(bs, dtype=torch.int64, **m)
    i64 = dict(dtype=torch.int64, **m)
    for mode in (0, 1):
        spec_tree.build_tree_kernel_efficient(
            torch.empty(bs, 2, **i64),
            torch.empty(bs, 2, **i64),
            seq,
            torch.empty(100, dtype=torch.bool, **m),
            torch.empty(bs * n, **i64),
            torch.empty(bs, n, **i64),
            torch.empty(bs, n, **i64),
            torch.empty(bs, n, **i64),
            1,
            2,
            n,
            mode,
        )
    spec_tree.verify_tree_greedy(
        torch.empty(bs * n, dtype=torch.int32, **m),
        torch.empty(bs, n, dtype=torch.int32, **m),
        torch.empty(bs, dtype=torch.int32, **m),
        torch.empty(bs, n, **i64),
        torch.empty(bs, n, **i64),
        torch.empty(bs, n, **i64),
        torch.empty(bs, n, **i64),
        torch.empty(bs * n, **i64),
    )
    with pytest.raises((RuntimeError, NotImplementedError)):  # the control: the loop reference syncs
        ref.verify_tree_greedy(
            torch.empty(bs * n, dtype=torch.int32, **m),
            torch.empty(bs, n, dtype=torch.int32, **m),
            torch.empty(bs, dtype=torch.int32, **m),
            torch.empty(bs, n, **i64),
            torch.empty(bs, n, **i64),
            torch.empty(bs, n, **i64),
            torch.empty(bs, n, **i64),
            torch.empty(bs * n, **i64),
        )
