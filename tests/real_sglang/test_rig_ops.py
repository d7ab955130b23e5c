"""The rig's pure-torch sgl_kernel CPU operators, each checked against plain torch."""

from __future__ import annotations

import pytest

from tests.support.lazy import lazy

# imported by the first test that runs, not by every worker that collects this module (tests/support/lazy.py)
torch = lazy("torch")
F = lazy("torch.nn.functional")
cpu_ops = lazy("tests.real_sglang.rig.cpu_ops")
ops = lazy("torch", "ops.sgl_kernel")
pytestmark = pytest.mark.xdist_group("torch")  # one worker imports torch for these (tests/conftest.py)


@pytest.fixture(scope="module", autouse=True)
def _registered():
    pytest.importorskip("torch", reason="the rig's operators need torch (comes with sglang)")
    cpu_ops.register()


def test_register_is_idempotent_and_complete():
    assert set(cpu_ops.register()) <= set(cpu_ops.OPS)
    for name in cpu_ops.OPS:
        assert callable(getattr(ops, name)), name


def _pool(rows=4, pool_len=32):
    return torch.randperm(rows * pool_len).to(torch.int32).view(rows, pool_len)


def test_assign_req_to_token_pool_and_extend_cache_locs_round_trip():
    r2t = torch.zeros(4, 16, dtype=torch.int32)
    rpi = torch.tensor([2, 0], dtype=torch.int64)
    start, end = torch.tensor([3, 0], dtype=torch.int32), torch.tensor([6, 2], dtype=torch.int32)
    locs = torch.tensor([10, 11, 12, 20, 21], dtype=torch.int64)
    ops.assign_req_to_token_pool_cpu(rpi, r2t, start, end, locs, 16)
    assert r2t[2, 3:6].tolist() == [10, 11, 12] and r2t[0, 0:2].tolist() == [20, 21]
    assert int(r2t.sum()) == sum(locs.tolist())
    out = torch.full((7,), -5, dtype=torch.int64)
    ops.assign_extend_cache_locs_cpu(rpi, r2t, start, end, out, 16)
    assert out.tolist() == [10, 11, 12, 20, 21, -5, -5]


def test_assign_req_to_token_pool_rejects_short_out_cache_loc():
    r2t = torch.zeros(2, 8, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="out_cache_loc has 1 entries"):
        ops.assign_req_to_token_pool_cpu(torch.tensor([0]), r2t, torch.tensor([0]), torch.tensor([3]), torch.tensor([1]), 8)


def _loop_assign(rpi, r2t, start, end, locs):
    """The per-request loop the vectorized stand-ins replaced: the reference."""
    pos = 0
    for row, s, e in zip(rpi.tolist(), start.tolist(), end.tolist()):
        r2t[row, s:e] = locs[pos : pos + e - s].to(r2t.dtype)
        pos += e - s


def _loop_extend(rpi, r2t, start, end, out):
    pos = 0
    for row, s, e in zip(rpi.tolist(), start.tolist(), end.tolist()):
        out[pos : pos + e - s] = r2t[row, s:e].to(out.dtype)
        pos += e - s


@pytest.mark.parametrize("seed", range(10))
def test_the_vectorized_segment_ops_match_the_loop_at_random_batches(seed):
    """Random batches up to 48 requests, segments of 0-5 slots (steps-0 and verify widths,
    an empty one included), mixed or all one width (the broadcast path): the vectorized ops
    write what the loop writes, no more."""
    g = torch.Generator().manual_seed(seed)
    rows_n, pool_len = 64, 64
    bs = int(torch.randint(1, 49, (1,), generator=g))
    rpi = torch.randperm(rows_n, generator=g)[:bs].to(torch.int64)
    start = torch.randint(0, pool_len - 6, (bs,), generator=g).to(torch.int32)
    widths = torch.randint(0, 6, (bs,), generator=g) if seed % 2 else torch.full((bs,), seed % 5)
    end = start + widths.to(torch.int32)  # odd seeds: mixed widths; even: one width (0, 2, 4, 1, 3...)
    total = int((end - start).sum())
    locs = torch.randint(0, 10_000, (total + 3,), generator=g)
    base = torch.randint(0, 10_000, (rows_n, pool_len), generator=g).to(torch.int32)
    want, got = base.clone(), base.clone()
    _loop_assign(rpi, want, start, end, locs)
    ops.assign_req_to_token_pool_cpu(rpi, got, start, end, locs, pool_len)
    assert torch.equal(got, want)
    want_out, got_out = torch.full((total + 3,), -7), torch.full((total + 3,), -7)
    _loop_extend(rpi, base, start, end, want_out)
    ops.assign_extend_cache_locs_cpu(rpi, base, start, end, got_out, pool_len)
    assert torch.equal(got_out, want_out)
    # the bonus token: the last accepted of each request (stride = draft tokens a request)
    stride = 4
    accept = torch.randint(0, 1000, (bs, stride), generator=g).to(torch.int32)
    lens = torch.randint(1, stride + 1, (bs,), generator=g).to(torch.int32)
    bonus = torch.zeros(bs + 2, dtype=torch.int32)
    ops.fill_bonus_tokens_cpu(accept, lens, bonus, stride)
    assert bonus[:bs].tolist() == [accept[i, n - 1].item() for i, n in enumerate(lens.tolist())]
    assert bonus[bs:].tolist() == [0, 0]


def test_draft_cache_locs_and_draft_decode_metadata():
    r2t, topk, steps = _pool(), 2, 3
    rpi, seq = torch.tensor([3, 1]), torch.tensor([5, 9])
    out = torch.empty(2 * topk * steps, dtype=torch.int64)
    ops.assign_draft_cache_locs_contiguous_cpu(rpi, r2t, seq, out, 32, topk, steps)
    assert out.tolist() == r2t[3, 5:11].tolist() + r2t[1, 9:15].tolist()
    meta = ops.build_draft_decode_metadata_cpu(r2t, rpi, seq, topk, steps, 32)
    assert meta.shape == (4, 32) and meta.dtype == torch.int32
    for b, (row, sl) in enumerate([(3, 5), (1, 9)]):
        for k in range(topk):
            expect = torch.cat([r2t[row, :sl], r2t[row, sl + k * steps : sl + (k + 1) * steps]])
            assert meta[b * topk + k, : sl + steps].tolist() == expect.tolist()


def test_fill_bonus_tokens_and_accept_out_cache_loc():
    accept = torch.tensor([[7, 8, 9], [4, 5, 6]], dtype=torch.int32)
    bonus = torch.zeros(2, dtype=torch.int32)
    ops.fill_bonus_tokens_cpu(accept, torch.tensor([3, 1], dtype=torch.int32), bonus, 3)
    assert bonus.tolist() == [9, 4]
    idx = torch.tensor([0, 2, -1, 3, -1, -1], dtype=torch.int32)
    out = torch.zeros(6, dtype=torch.int64)
    ops.fill_accept_out_cache_loc_cpu(idx, torch.arange(100, 106), out)
    assert out[:3].tolist() == [100, 102, 103]


def test_rotate_input_ids_shifts_each_segment():
    ids = torch.tensor([1, 2, 3, 4, 5, 6, 7])
    ops.rotate_input_ids_cpu(ids, torch.tensor([0, 3]), torch.tensor([3, 4]), torch.tensor([[90], [91]]), None)
    assert ids.tolist() == [2, 3, 90, 5, 6, 7, 91]
    ids = torch.tensor([1, 2, 3, 4])
    ops.rotate_input_ids_cpu(ids, torch.tensor([0]), torch.tensor([4]), torch.tensor([9]), torch.tensor([1]))
    assert ids.tolist() == [2, 9, 4, 4]


def _chain_tree(bs, n, seq_lens):
    """topk=1 chain: build_tree output for a chain of n draft tokens per request."""
    # as SGLang's organize_draft_results lays a topk=1 chain out: parents [-1, 0, 1, ...]
    parent = torch.arange(-1, n - 2, dtype=torch.int64).repeat(bs, 1)  # width depth = n - 1
    selected = torch.arange(0, n - 1, dtype=torch.int64).repeat(bs, 1)
    verified = torch.tensor(seq_lens, dtype=torch.int64)
    mask = torch.ones(int(verified.sum()) * n + bs * n * n, dtype=torch.bool)
    pos = torch.empty(bs * n, dtype=torch.int64)
    ri = torch.empty(bs, n, dtype=torch.int64)
    nxt = torch.full((bs, n), -1, dtype=torch.int64)
    sib = torch.full((bs, n), -1, dtype=torch.int64)
    ops.build_tree_kernel_efficient_cpu(parent, selected, verified, mask, pos, ri, nxt, sib, 1, n - 1, n, 0)
    return mask, pos, ri, nxt, sib


def test_build_tree_chain_is_causal_with_positions_and_links():
    n, seq_lens = 3, [4, 2]
    mask, pos, ri, nxt, sib = _chain_tree(2, n, seq_lens)
    assert pos.tolist() == [4, 5, 6, 2, 3, 4]
    assert ri.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert nxt.tolist() == [[1, 2, -1], [1, 2, -1]] and (sib == -1).all()
    off = 0
    for sl in seq_lens:
        block = mask[off : off + n * (sl + n)].view(n, sl + n)
        assert block[:, :sl].all()  # the prefix (pre-filled) stays visible
        assert torch.equal(block[:, sl:], torch.tril(torch.ones(n, n, dtype=torch.bool)))
        off += n * (sl + n)


def test_verify_tree_greedy_accepts_the_matching_prefix():
    n = 3
    _, _, ri, nxt, sib = _chain_tree(2, n, [4, 2])
    cand = torch.tensor([[50, 60, 70], [50, 61, 70]])
    target = torch.tensor([[60, 70, 80], [60, 70, 80]])  # target argmax at each node
    predicts = torch.zeros(2 * n, dtype=torch.int32)
    accept = torch.full((2, n), -1, dtype=torch.int32)
    num = torch.zeros(2, dtype=torch.int32)
    ops.verify_tree_greedy_cpu(predicts, accept, num, cand, ri, nxt, sib, target)
    assert num.tolist() == [2, 0]
    assert accept.tolist() == [[0, 1, 2], [3, -1, -1]]
    assert predicts.tolist() == [60, 70, 80, 60, 0, 0]


def test_build_tree_rejects_bitpacked_mode():
    with pytest.raises(RuntimeError, match="tree_mask_mode 2"):
        ops.build_tree_kernel_efficient_cpu(
            *[torch.zeros(1, 1, dtype=torch.int64)] * 2,
            torch.zeros(1, dtype=torch.int64),
            torch.zeros(1, dtype=torch.bool),
            *[torch.zeros(1, dtype=torch.int64)] * 4,
            1,
            1,
            2,
            2,
        )


def test_copy_all_layer_kv_cache_moves_rows_in_every_buffer():
    bufs = [torch.arange(40, dtype=torch.float32).view(10, 4).clone() for _ in range(2)]
    before = [b.clone() for b in bufs]
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    strides = torch.tensor([b.stride(0) * b.element_size() for b in bufs], dtype=torch.int64)
    ops.copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([5, 6]), torch.tensor([6, 1]))
    for b, old in zip(bufs, before):
        assert b[5].tolist() == old[6].tolist() and b[6].tolist() == old[1].tolist()
        assert b[0].tolist() == old[0].tolist()


def _ref_attention(q, k, v, causal_from=None, sm_scale=None):
    """torch SDPA over [T,H,D] x [L,Hkv,D] with GQA expanded."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    mask = None
    if causal_from is not None:
        mask = torch.arange(k.shape[0]).view(1, -1) <= (causal_from + torch.arange(q.shape[0])).view(-1, 1)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask, scale=sm_scale)
    return out.transpose(0, 1)


def test_decode_attention_matches_sdpa_and_writes_the_new_kv():
    g = torch.Generator().manual_seed(1)
    H, Hkv, D, slots = 4, 2, 8, 64
    kc, vc = torch.randn(slots, Hkv, D, generator=g), torch.randn(slots, Hkv, D, generator=g)
    r2t = torch.randperm(slots).to(torch.int32).view(4, 16)
    rpi, seq = torch.tensor([2, 0]), torch.tensor([5, 9])
    q = torch.randn(2, H, D, generator=g)
    knew, vnew = torch.randn(2, Hkv, D, generator=g), torch.randn(2, Hkv, D, generator=g)
    loc = torch.stack([r2t[2, 4], r2t[0, 8]]).long()
    out = torch.empty(2, H, D)
    logits = torch.empty(2, H, 8, D + 1)
    ops.decode_attention_cpu(q, kc, vc, 1.0, 1.0, out, knew, vnew, loc, logits, r2t, rpi, seq, D**-0.5, 0.0, False, 0, None, None)
    assert torch.equal(kc[loc], knew) and torch.equal(vc[loc], vnew)
    for i, (row, n) in enumerate([(2, 5), (0, 9)]):
        s = r2t[row, :n].long()
        ref = _ref_attention(q[i : i + 1], kc[s], vc[s])
        torch.testing.assert_close(out[i : i + 1], ref, rtol=1e-5, atol=1e-5)


def test_extend_attention_matches_causal_sdpa():
    g = torch.Generator().manual_seed(2)
    H, Hkv, D, slots = 4, 2, 8, 64
    kb, vb = torch.randn(slots, Hkv, D, generator=g), torch.randn(slots, Hkv, D, generator=g)
    r2t = torch.randperm(slots).to(torch.int32).view(4, 16)
    rpi = torch.tensor([1, 3])
    seq, ext = torch.tensor([6, 3]), torch.tensor([2, 3])
    start = torch.tensor([0, 2])
    T = int(ext.sum())
    q, ke, ve = (torch.randn(T, h, D, generator=g) for h in (H, Hkv, Hkv))
    out = torch.empty(T, H, D)
    ops.extend_attention_cpu(
        q, ke, ve, out, kb, vb, 1.0, 1.0, r2t, rpi, seq, ext, start, 3, D**-0.5, 0.0, False, 0, None, None, None, True
    )
    for i in range(2):
        n, e, st, row = int(seq[i]), int(ext[i]), int(start[i]), int(rpi[i])
        s = r2t[row, :n].long()
        k = torch.cat([kb[s[: n - e]], ke[st : st + e]])
        v = torch.cat([vb[s[: n - e]], ve[st : st + e]])
        ref = _ref_attention(q[st : st + e], k, v, causal_from=n - e)
        torch.testing.assert_close(out[st : st + e], ref, rtol=1e-5, atol=1e-5)


def _one_query_case(seed: int):
    """An extend call with one causal query per request, as a target-only verify makes it."""
    g = torch.Generator().manual_seed(seed)
    H, Hkv, D, slots = 4, 2, 8, 64
    kb, vb = torch.randn(slots, Hkv, D, generator=g), torch.randn(slots, Hkv, D, generator=g)
    r2t = torch.randperm(slots).to(torch.int32).view(4, 16)
    rpi, seq = torch.tensor([3, 0, 2]), torch.tensor([7, 1, 12])
    ext, start = torch.ones(3, dtype=torch.int32), torch.arange(3, dtype=torch.int32)
    q, ke, ve = (torch.randn(3, h, D, generator=g) for h in (H, Hkv, Hkv))
    new = r2t[rpi, seq - 1].long()
    return kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, new, D


def _extend(kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, D):
    out = torch.empty(q.shape)
    ops.extend_attention_cpu(
        q, ke, ve, out, kb, vb, 1.0, 1.0, r2t, rpi, seq, ext, start, 1, D**-0.5, 0.0, False, 0, None, None, None, True
    )
    return out


def test_extend_with_one_query_per_request_runs_the_decode_loop_bit_for_bit(monkeypatch):
    """The cache holds the new K/V (SGLang's forward_extend wrote them): the decode
    stand-in's loop runs, and its output equals the general path's bit for bit."""
    from tests.real_sglang.rig import attention_ops

    kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, new, D = _one_query_case(3)
    kb[new], vb[new] = ke, ve
    calls = []
    decode = attention_ops.decode_attention
    monkeypatch.setattr(attention_ops, "decode_attention", lambda *a: (calls.append(1), decode(*a)))
    fast = _extend(kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, D)
    assert calls == [1]
    monkeypatch.setattr(attention_ops, "_one_query_cached", lambda *a: False)
    general = _extend(kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, D)
    assert calls == [1] and torch.equal(fast, general)


def test_extend_with_one_query_takes_new_kv_from_its_arguments_when_the_cache_lacks_them(monkeypatch):
    """The cache holds other values at the new slots (nothing wrote them): the general path
    runs and attends over the new K/V passed in, as the real kernel does."""
    from tests.real_sglang.rig import attention_ops

    kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, new, D = _one_query_case(4)
    calls = []
    decode = attention_ops.decode_attention
    monkeypatch.setattr(attention_ops, "decode_attention", lambda *a: (calls.append(1), decode(*a)))
    out = _extend(kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, D)
    assert calls == []
    for i in range(3):
        n, row = int(seq[i]), int(rpi[i])
        s = r2t[row, :n].long()
        k, v = torch.cat([kb[s[:-1]], ke[i : i + 1]]), torch.cat([vb[s[:-1]], ve[i : i + 1]])
        torch.testing.assert_close(out[i : i + 1], _ref_attention(q[i : i + 1], k, v), rtol=1e-5, atol=1e-5)


def test_one_query_metadata_is_recomputed_after_an_in_place_change_and_in_inference_mode():
    """The memo of the new-token slots follows in-place changes of its inputs (a request
    moved to another pool row) and is skipped for inference tensors."""
    from tests.real_sglang.rig import attention_ops

    kb, vb, r2t, rpi, seq, ext, start, q, ke, ve, new, D = _one_query_case(5)
    assert torch.equal(attention_ops._new_slots(r2t, rpi, seq, ext, start), new)
    rpi[0] = 1
    assert torch.equal(attention_ops._new_slots(r2t, rpi, seq, ext, start), r2t[rpi, seq - 1].long())
    with torch.inference_mode():
        r2t_i, rpi_i = r2t.clone(), rpi.clone()
        assert torch.equal(attention_ops._new_slots(r2t_i, rpi_i, seq, ext, start), r2t[rpi, seq - 1].long())
        rpi_i[0] = 3
        assert torch.equal(attention_ops._new_slots(r2t_i, rpi_i, seq, ext, start), r2t[rpi_i, seq - 1].long())


def test_murmur_hash_stand_in_matches_the_blockwise_reference():
    """The seeded sampler's hash (rig/sampling_ops.py), vectorised in int64, equals the same
    MurmurHash3 written on Python integers, row by row and column by column, seeds above
    2**32 included. (Checked by hand once against the mmh3 package, MurmurHash3_x86_32 of
    the four 4-byte blocks with seed 0: equal; mmh3 is not a test dependency.)"""
    from tests.real_sglang.rig.sampling_ops import murmur_hash32_reference

    seeds = torch.tensor([0, 42, 2**40 + 7, 2**63 - 1], dtype=torch.uint64)
    positions = torch.tensor([0, 5, 17, 4095])
    cols = torch.arange(7)
    got = torch.ops.sgl_kernel.murmur_hash32_cpu(seeds, positions, cols)
    want = [[murmur_hash32_reference(int(s), int(p), int(c)) for c in cols] for s, p in zip(seeds.tolist(), positions.tolist())]
    assert got.tolist() == want
    assert len({v for row in want for v in row}) == 28  # no two cells alike
