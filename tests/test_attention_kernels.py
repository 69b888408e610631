"""The attention kernels' TMA-descriptor path (autotuned on Hopper and later; the interpreter's config takes the
pointer path, which tests/test_impls.py covers), launched directly: forward, dK/dV and dQ against float64; and
the order causal programs start in."""
import math

import pytest
import torch
import triton
import triton.language as tl

from kernels import attention as A


def run(q, k, v, do, causal, tma, bm=16, bn=16):
    """Forward and backward with one explicit tile and load path, as the launchers do: host-side descriptors
    over q, k, v, do, their block shapes set by the configs' pre-hook."""
    bsz, heads, seq, d = q.shape
    meta = A._meta(q)
    o = torch.empty_like(q)
    lse = torch.empty(bsz * heads, seq, dtype=torch.float32)
    tile = dict(BM=bm, BN=bn, TMA=tma, num_warps=4, num_stages=1)
    descriptors = dict(zip(("Q_TMA", "K_TMA", "V_TMA", "DO_TMA"),
                           (A._descriptor(t, 16, meta["HEAD_DIM"]) for t in (q, k, v, do))))
    A._set_blocks({**descriptors, **meta, **tile})
    qd, kd, vd, dod = descriptors.values()
    scale = 1 / math.sqrt(d)
    A._fwd_kernel.fn[(triton.cdiv(seq, bm), bsz * heads)](
        q, k, v, qd, kd, vd, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], heads, seq,
        scale * A.LOG2E, CAUSAL=causal, **meta, **tile)
    delta = (o.float() * do.float()).sum(-1).reshape(bsz * heads, seq).contiguous()
    dq, dk, dv = (torch.empty_like(do) for _ in range(3))
    args = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], heads, seq, scale * A.LOG2E, scale)
    A._dkdv_kernel.fn[(triton.cdiv(seq, bn), bsz * heads)](q, k, v, do, qd, kd, vd, dod, lse, delta, dk, dv, *args,
                                                            CAUSAL=causal, **meta, **tile)
    A._dq_kernel.fn[(triton.cdiv(seq, bm), bsz * heads)](q, k, v, do, qd, kd, vd, dod, lse, delta, dq, *args,
                                                          CAUSAL=causal, **meta, **tile)
    return o, dq, dk, dv


def reference(q, k, v, do, causal):
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v
    o.backward(do.double())
    return o.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("shape", [(2, 3, 37, 16), (1, 2, 100, 64), (1, 1, 83, 40), (1, 1, 1, 64)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tma_path_matches_float64(shape, causal, dtype):
    """Rows past the sequence end and columns past head_dim 40 come from the descriptors' zero fill."""
    gen = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(*shape, generator=gen).to(dtype) for _ in range(4))
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for name, got, want in zip(("o", "dq", "dk", "dv"), run(q, k, v, do, causal, tma=True),
                               reference(q, k, v, do, causal)):
        # dq of a one-key sequence is exactly zero: there the error is judged absolutely (norm floor 1)
        err = ((got.double() - want).norm() / want.norm().clamp_min(1.0)).item()
        assert err < tol, f"{name}: relative error {err:.2e}"


@pytest.mark.parametrize("bm, bn", [(16, 16), (32, 16)])
def test_both_load_paths_agree(bm, bn):
    """Query and key tiles of different heights: each descriptor gets its own block shape."""
    gen = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(1, 2, 57, 32, generator=gen) for _ in range(4))
    for a, b in zip(run(q, k, v, do, True, tma=True, bm=bm, bn=bn), run(q, k, v, do, True, tma=False, bm=bm, bn=bn)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_set_blocks_gives_query_and_key_descriptors_their_tile_heights():
    q = torch.zeros(2, 3, 40, 64, dtype=torch.bfloat16)
    nargs = {name: A._descriptor(q, 16, 64) for name in ("Q_TMA", "K_TMA", "V_TMA", "DO_TMA")}
    A._set_blocks({**nargs, "BM": 128, "BN": 32, "HEAD_DIM": 64})
    assert [d.block_shape for d in nargs.values()] == [[1, 1, 128, 64], [1, 1, 32, 64], [1, 1, 32, 64],
                                                       [1, 1, 128, 64]]
    A._set_blocks({"Q_TMA": None, "BM": 128, "BN": 32, "HEAD_DIM": 64})  # no descriptors (pointer loads): no-op


def test_descriptors_only_where_tma_can_load(monkeypatch):
    """The launchers pass descriptors only when the probe passed, for 16-bit types, a power-of-two head_dim and
    16-byte aligned addresses and strides; otherwise Nones, and the TMA configs are pruned."""
    monkeypatch.setattr(A, "_TMA_OK", True)
    bf16 = torch.zeros(1, 2, 40, 64, dtype=torch.bfloat16)
    made = A._descriptors(A._meta(bf16), bf16, bf16)
    assert [d.shape for d in made] == [[1, 2, 40, 64]] * 2 and made[0].strides == list(bf16.stride())
    odd = torch.zeros(1, 2, 40, 40, dtype=torch.bfloat16)  # head_dim 40: padded to 64, blocks wider than the rows
    unaligned = torch.zeros(1, 2, 40, 68, dtype=torch.bfloat16)[..., :64]  # row stride 136 B
    fp32 = torch.zeros(1, 2, 40, 64)
    for t in (odd, unaligned, fp32):
        assert A._descriptors(A._meta(t), t, t) == [None, None]
    monkeypatch.setattr(A, "_TMA_OK", False)
    assert A._descriptors(A._meta(bf16), bf16) == [None]


def test_forward_configs_offered_per_dtype_and_tma(monkeypatch):
    """On a GPU the forward autotunes bf16 tiles (with TMA variants only where descriptors work) and the fp32
    tiles for fp32 alone."""
    monkeypatch.setattr(A, "INTERPRETED", False)
    configs = A._configs(A.FWD_TILES, tma_only=A.FWD_TMA_ONLY)

    def offered(dtype, tma_ok):
        monkeypatch.setattr(A, "_TMA_OK", tma_ok)
        q = torch.empty(1, 2, 64, 64, dtype=dtype)
        meta = A._meta(q)
        args = {"Q": q, "K": q, "V": q, "Q_TMA": A._descriptors(meta, q)[0]}
        return A._fwd_prune(configs, args, **meta)

    with_tma = offered(torch.bfloat16, True)
    assert any(c.kwargs["TMA"] for c in with_tma) and any(not c.kwargs["TMA"] for c in with_tma)
    assert {A._config_tile(c) for c in with_tma if c.kwargs["TMA"]} >= set(A.FWD_TMA_ONLY)
    without = offered(torch.bfloat16, False)
    assert not any(c.kwargs["TMA"] for c in without)
    assert not {A._config_tile(c) for c in without} & set(A.FWD_TMA_ONLY)  # descriptors only: no pointer variant
    fp32 = offered(torch.float32, True)
    assert fp32 and all(A._config_tile(c) in A.FP32_TILES for c in fp32)
    # a register cap reaches the config (two CTAs an SM) and is offered only up to head_dim 64
    assert any(c.maxnreg == 128 for c in with_tma)
    q128 = torch.empty(1, 2, 64, 128, dtype=torch.bfloat16)  # _TMA_OK is True from the fp32 call above
    meta = A._meta(q128)
    at_128 = A._fwd_prune(configs, {"Q": q128, "Q_TMA": A._descriptors(meta, q128)[0]}, **meta)
    assert at_128 and not any(c.maxnreg for c in at_128)


@triton.jit
def _record_schedule(OUT, n_blocks, CAUSAL: tl.constexpr, LONGEST_LAST: tl.constexpr, HEAD_GROUP: tl.constexpr):
    blk, bh = A._block_index(n_blocks, CAUSAL, LONGEST_LAST, HEAD_GROUP)
    rank = tl.program_id(1) * n_blocks + tl.program_id(0)  # the order programs start in
    tl.store(OUT + 2 * rank, blk)
    tl.store(OUT + 2 * rank + 1, bh)


@pytest.mark.parametrize("longest_last", [True, False])
def test_causal_programs_start_longest_first_in_groups_of_heads(longest_last):
    """Every (block, head) exactly once; causal: heads in groups of HEAD_GROUP (the last one short), and within
    a group the longest block of each head before any shorter one; without a mask, the grid's own order."""
    n_blocks, n_bh, group = 5, 6, 4
    for causal in (True, False):
        out = torch.empty(n_blocks * n_bh, 2, dtype=torch.int32)
        _record_schedule[(n_blocks, n_bh)](out, n_blocks, CAUSAL=causal, LONGEST_LAST=longest_last,
                                           HEAD_GROUP=group)
        pairs = [tuple(p) for p in out.tolist()]
        assert sorted(pairs) == [(b, h) for b in range(n_blocks) for h in range(n_bh)]
        if not causal:
            assert pairs == [(b, h) for h in range(n_bh) for b in range(n_blocks)]
            continue
        length = [b + 1 if longest_last else n_blocks - b for b, _ in pairs]  # key (query) blocks walked
        assert {h for _, h in pairs[:group * n_blocks]} == set(range(group))
        for part in (length[:group * n_blocks], length[group * n_blocks:]):
            assert part == sorted(part, reverse=True)


def test_attention_refuses_q_k_v_of_different_dtypes():
    q = torch.ones(1, 1, 4, 8)
    with pytest.raises(ValueError, match="share one dtype"):
        A.flash_attention(q, q.bfloat16(), q)
