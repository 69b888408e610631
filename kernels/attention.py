"""FlashAttention-2 in Triton: softmax(Q K^T / sqrt(d) [+ causal mask]) V for q, k, v [batch, heads, seq, head_dim].

Forward: one program per (BM query rows, batch x head), an online softmax in base 2 over the key blocks (only
the diagonal and the last partial block masked), saving the logsumexp. Backward recomputes the probabilities
from it: delta = rowsum(O * dO), then one kernel per key block for dK and dV and one per query block for dQ (no
atomics). Any seq length, head_dim 16..128 (padded to a power of two), bf16 / fp16 with fp32 accumulation, fp32
with IEEE products. Tiles are autotuned, and on Hopper and later so is how they load: pointers, or TMA
descriptors made on the host (_descriptors).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels._autotune import INTERPRETED, check_dtype, quick_bench

LOG2E = 1.4426950408889634


def _configs(tiles, tma_tiles: int = 3, tma_only=()):
    """(BM, BN, num_warps, num_stages[, maxnreg]) tiles, each with pointer loads, the first `tma_tiles` again with TMA
    descriptors (pruned where the launcher made none), the `tma_only` tiles with descriptors alone, and the
    FP32_TILES; few, as each costs a compile per head_dim and dtype. The interpreter gets one small pointer config
    (tests/ launch the TMA path directly)."""
    if INTERPRETED:
        return [triton.Config({"BM": 16, "BN": 16, "TMA": False}, num_warps=4, num_stages=1)]
    chosen = ([(t, False) for t in tiles] + [(t, True) for t in tiles[:tma_tiles]] + [(t, True) for t in tma_only]
              + [(t, False) for t in FP32_TILES])
    return [triton.Config({"BM": m, "BN": n, "TMA": tma}, num_warps=w, num_stages=s, maxnreg=cap[0] if cap else None,
                          pre_hook=_set_blocks) for (m, n, w, s, *cap), tma in chosen]


def _config_tile(c: triton.Config) -> tuple:
    """A config's tile as the tile lists write it."""
    return (c.kwargs["BM"], c.kwargs["BN"], c.num_warps, c.num_stages) + ((c.maxnreg,) if c.maxnreg else ())


_TMA_OK: bool | None = None  # whether TMA descriptors work in this process (probed once on the first CUDA call)
TMA_ERROR = ""  # why they do not, when the probe launch raised
# Each kernel's descriptor arguments and the tile rows their blocks hold: queries and output gradients BM, keys
# and values BN (in every kernel).
_BLOCK_ROWS = {"Q_TMA": "BM", "DO_TMA": "BM", "K_TMA": "BN", "V_TMA": "BN"}


def _descriptor(t: torch.Tensor, rows: int, head_dim: int) -> TensorDescriptor:
    """A TMA descriptor over t [B, H, S, D] loading [rows, head_dim] blocks of one head (zeros past S and D)."""
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, rows, head_dim])


def _set_blocks(nargs: dict) -> None:
    """Config pre-hook: set the descriptors' block shapes to this config's tiles before it is launched (every
    config, so a pointer config's unused descriptors do not change its compiled signature from call to call)."""
    for name, rows in _BLOCK_ROWS.items():
        if nargs.get(name) is not None:
            nargs[name].block_shape = [1, 1, nargs[rows], nargs["HEAD_DIM"]]


def _descriptors(meta: dict, *tensors: torch.Tensor) -> list:
    """Host-side descriptors over the tensors, or Nones where TMA cannot be used: the probe failed, head_dim is
    not a power of two (blocks no wider than the matrix), a base address or stride is not 16-byte aligned, or
    fp32, whose IEEE products spill more with them (sm_90, head_dim 16, 128 x 64: 1008 B of stack a thread
    against 128). Their block shapes are set per config by _set_blocks.

    Descriptor loads need far fewer registers than pointer arithmetic (sm_90: the dK/dV kernel at head_dim 128,
    64 x 128 tiles, 255 registers and 808 B of spills with pointers, 254 and none with descriptors; the forward
    at 128 x 64, 255 against 143). Made on the host and passed as kernel arguments, as in Triton's own Hopper
    attention tutorial: made inside the kernel (tl.make_tensor_descriptor), every program wrote its three to
    global scratch and fenced before its first load, and the forward ran 2.5% slower (H200, bf16 causal
    [4, 32, 4096, 128]: 1.149-1.158 ms against 1.120, session 20)."""
    aligned = lambda t: t.data_ptr() % 16 == 0 and all(s * t.element_size() % 16 == 0 for s in t.stride()[:3])
    if not (_TMA_OK and meta["D"] == meta["HEAD_DIM"] and tensors[0].dtype != torch.float32
            and all(aligned(t) for t in tensors)):
        return [None] * len(tensors)
    return [_descriptor(t, 16, meta["HEAD_DIM"]) for t in tensors]


def _for_dtype(configs, named_args, kwargs):
    """TMA configs where the launcher made descriptors; fp32 gets only the FP32_TILES and the others only
    theirs."""
    if INTERPRETED:
        return configs
    fp32 = named_args["Q"].dtype == torch.float32
    tma = named_args["Q_TMA"] is not None
    return [c for c in configs if (_config_tile(c) in FP32_TILES) == fp32 and (tma or not c.kwargs["TMA"])]


def _fwd_prune(configs, named_args, **kwargs):
    """The forward's causal split needs BM a multiple of BN; 128-wide tiles at head_dim 128 in fp32 spill, and
    register caps (maxnreg) are for head_dim 64 and below."""
    d = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    fp32 = named_args["Q"].dtype == torch.float32
    kept = [c for c in _for_dtype(configs, named_args, kwargs) if c.kwargs["BM"] % c.kwargs["BN"] == 0
            and not (fp32 and d >= 128 and c.kwargs["BM"] * c.kwargs["BN"] > 64 * 64)
            and not (c.maxnreg and d > 64)]
    return kept or configs[:1]


def _bwd_prune(configs, named_args, **kwargs):
    """fp32 tiles above 64 x 64 and head_dim 128 tiles above 64 x 128 run out of shared memory or spill."""
    d = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    fp32 = named_args["Q"].dtype == torch.float32
    area = lambda c: c.kwargs["BM"] * c.kwargs["BN"]
    kept = [c for c in _for_dtype(configs, named_args, kwargs)
            if not ((fp32 and area(c) > 64 * 64) or (d >= 128 and area(c) > 64 * 128))]
    return kept or [min(configs, key=area)]


def _dq_prune(configs, named_args, **kwargs):
    """As the other backward kernels, and BN must divide BM (the causal split)."""
    kept = [c for c in _bwd_prune(configs, named_args, **kwargs) if c.kwargs["BM"] % c.kwargs["BN"] == 0]
    return kept or [min(configs, key=lambda c: (c.kwargs["TMA"], c.kwargs["BN"]))]


# (BM, BN, num_warps, num_stages): the best few of a sweep of 24 forward and 12 + 12 backward tiles on an H200
# (bf16, causal; [4, 32, 4096, 128] and [1, 16, 16384, 64]).
FWD_TILES = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 4), (64, 64, 4, 3), (128, 32, 4, 3)]
# With descriptors only. One warpgroup a CTA and two stages (two CTAs an SM): on an H200 (session 18, bf16 causal)
# 1.148 ms at [4, 32, 4096, 128] against 1.188 for TMA 128 x 128 (the pick before); with pointers 1.410. And
# 128 x 128 at 8 warps capped at 128 registers, so two CTAs share an SM (175 registers uncapped at head_dim 64,
# one CTA): at [1, 16, 16384, 64] 1.228 ms against 1.284 for the pick before (128 x 64, 8 warps, 3 stages) and
# 1.43 uncapped (session 20, host descriptors); capped at head_dim 128 such tiles spill (128 x 128, 2 stages:
# 8.9 ms), so _fwd_prune offers caps at head_dim 64 and below.
FWD_TMA_ONLY = [(128, 64, 4, 2), (128, 128, 8, 3, 128)]
# Tried on an H200 and left out (session 20, host descriptors, [4, 32, 4096, 128] bf16 causal): a lazy rescale
# (the running max raised, and acc and l rescaled, only when a row's block max passes it by more than 8, in a
# branch): 1.27-1.45 ms against 1.12 for this kernel, the branch over the accumulator costing more than the
# multiplies it skips; 128 x 64 tiles at 8 warps capped at 128 registers (1.16-1.40 ms).
# Tried on an H200 and left out (session 19): 64 x 64 tiles with descriptors (one warpgroup, 138 registers and
# no spills with Triton 3.6 where 128 x 64 spills 80 B): in two autotunes 1.158 and 1.162 ms against 1.139 and
# 1.194 for 128 x 64; picked in the second, the bench read 1.195 ms against 1.160 in the first.
# Tried on an H200 and left out (session 15, [4, 32, 4096, 128] bf16 causal): a TMA 128 x 64 tile capped at 128
# registers so two CTAs share an SM (1.198 ms against 1.193 for TMA 128 x 128); issuing the next key block's
# Q K^T before this block's softmax (Triton waits for every outstanding wgmma before the softmax: no overlap);
# tl.range(warp_specialize=True) does not specialize on sm_90.
DKDV_TILES = [(64, 128, 8, 3), (32, 128, 4, 3), (64, 64, 4, 3), (32, 64, 4, 3)]
DQ_TILES = [(128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 2), (64, 32, 4, 3)]
# fp32 (IEEE products on CUDA cores, operands in registers): the bf16 tiles spill kilobytes a thread; compiled
# for sm_90 these spilled least (head_dim 64: forward and dQ none, dK/dV 600 B; head_dim 128: 650-2000 B).
FP32_TILES = [(64, 32, 8, 2), (32, 32, 4, 2)]



@triton.jit
def _load_rows(base, rows, stride, offs_d, S, D: tl.constexpr, HEAD_DIM: tl.constexpr, ROW_MASK: tl.constexpr):
    """A [len(rows), HEAD_DIM] tile of a [S, D] matrix; masks only where needed (rows past S, columns past D)."""
    ptrs = base + rows[:, None].to(tl.int64) * stride + offs_d[None, :]
    if ROW_MASK:
        if D == HEAD_DIM:
            return tl.load(ptrs, mask=(rows < S)[:, None], other=0.0)
        return tl.load(ptrs, mask=(rows < S)[:, None] & (offs_d < D)[None, :], other=0.0)
    if D == HEAD_DIM:
        return tl.load(ptrs)
    return tl.load(ptrs, mask=(offs_d < D)[None, :], other=0.0)


@triton.jit
def _source(X, X_TMA, b, h, stride_b, stride_h, TMA: tl.constexpr):
    """Where one head's [S, D] matrix is read from: the descriptor over [B, H, S, D], or the head's base
    pointer."""
    if TMA:  # one return per branch: the compiler types every return it reaches, even past a constexpr branch
        src = X_TMA
    else:
        src = X + b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h
    return src


@triton.jit
def _tile(src, b, h, start, offs, stride, offs_d, S, D: tl.constexpr, HEAD_DIM: tl.constexpr, ROWS: tl.constexpr,
          ROW_MASK: tl.constexpr, TMA: tl.constexpr):
    """Rows [start, start + ROWS) of a head's matrix as [ROWS, HEAD_DIM] (zeros past S and D)."""
    if TMA:
        tile = src.load([b, h, start, 0]).reshape(ROWS, HEAD_DIM)
    else:
        tile = _load_rows(src, start + offs, stride, offs_d, S, D, HEAD_DIM, ROW_MASK)
    return tile


@triton.jit
def _fwd_block(acc, l_i, m_i, q, k_src, v_src, b, h, stride_kn, stride_vn, lo, hi, offs_m, offs_n, offs_d, S,
               qk_scale, D: tl.constexpr, HEAD_DIM: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
               CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr):
    """Online softmax over key blocks [lo, hi); MASKED applies the sequence end and (CAUSAL) the diagonal."""
    for start in range(lo, hi, BN):
        cols = start + offs_n
        k = _tile(k_src, b, h, start, offs_n, stride_kn, offs_d, S, D, HEAD_DIM, BN, MASKED, TMA)  # [BN, HEAD_DIM]
        v = _tile(v_src, b, h, start, offs_n, stride_vn, offs_d, S, D, HEAD_DIM, BN, MASKED, TMA)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)  # [BM, BN], logits / qk_scale
        if MASKED:
            keep = cols[None, :] < S
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk, -float("inf"))
        # scaled to base-2 logits only here, in one multiply-add with the max subtracted (qk_scale > 0)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


# Causal programs start in groups of this many heads (see _block_index).
HEAD_GROUP = 4


@triton.jit
def _block_index(n_blocks, CAUSAL: tl.constexpr, LONGEST_LAST: tl.constexpr, HEAD_GROUP: tl.constexpr):
    """(block, batch x head) of this program. The grid is (blocks, batch x head) and programs start in the order
    of their linear id, blocks fastest. Without a mask every block is as long: the grid's own order, a head's
    blocks together so the programs running at once share its K and V through L2. Causal blocks are not (the
    last row block walks every key block, the first key block meets every query block: LONGEST_LAST says
    which), so the ids are remapped: heads in groups of HEAD_GROUP, and within a group the longest block of each
    of its heads first, then the next longest, so the short ones fill the tail. Taking each head's blocks
    longest first, head after head, left the last heads' long blocks to start near the end: on 132 SMs at
    [4, 32, 4096, 128] with 128-row blocks, a list schedule of that order takes 3.4% longer than the work spread
    evenly, one in groups of 4 heads 0.1%."""
    if CAUSAL:
        rank = tl.program_id(1) * n_blocks + tl.program_id(0)
        group = rank // (HEAD_GROUP * n_blocks)
        heads = tl.minimum(HEAD_GROUP, tl.num_programs(1) - group * HEAD_GROUP)  # fewer in the last group
        r = rank - group * HEAD_GROUP * n_blocks
        i = r // heads  # 0: the longest
        bh = group * HEAD_GROUP + r % heads
        blk = n_blocks - 1 - i if LONGEST_LAST else i
    else:
        blk = tl.program_id(0)
        bh = tl.program_id(1)
    return blk, bh


@triton.autotune(configs=_configs(FWD_TILES, tma_only=FWD_TMA_ONLY), key=["S", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _fwd_prune}, do_bench=quick_bench)
@triton.jit
def _fwd_kernel(Q, K, V, Q_TMA, K_TMA, V_TMA, O, LSE, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh,
                stride_ks, stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os, H, S, qk_scale,
                D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                PRECISION: tl.constexpr, HEAD_GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                TMA: tl.constexpr):
    blk, bh = _block_index(tl.cdiv(S, BM), CAUSAL, True, HEAD_GROUP)
    start_m = blk * BM
    b, h = bh // H, bh % H
    offs_m = start_m + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_DIM)
    q_src = _source(Q, Q_TMA, b, h, stride_qb, stride_qh, TMA)
    q = _tile(q_src, b, h, start_m, tl.arange(0, BM), stride_qs, offs_d, S, D, HEAD_DIM, BM, True, TMA)
    if UPCAST:
        q = q.to(tl.float32)
    k_src = _source(K, K_TMA, b, h, stride_kb, stride_kh, TMA)
    v_src = _source(V, V_TMA, b, h, stride_vb, stride_vh, TMA)
    m_i = tl.full([BM], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:  # blocks left of this row block need no mask; the diagonal block(s) do
        full_end = start_m
        end = tl.minimum(start_m + BM, S)
    else:  # every block but a partial last one
        full_end = (S // BN) * BN
        end = S
    acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, k_src, v_src, b, h, stride_ks, stride_vs, 0, full_end, offs_m,
                               offs_n, offs_d, S, qk_scale, D, HEAD_DIM, BN, False, CAUSAL, UPCAST, PRECISION, TMA)
    acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, k_src, v_src, b, h, stride_ks, stride_vs, full_end, end, offs_m,
                               offs_n, offs_d, S, qk_scale, D, HEAD_DIM, BN, True, CAUSAL, UPCAST, PRECISION, TMA)
    o = acc / l_i[:, None]
    o_base = O + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh
    tl.store(o_base + offs_m[:, None].to(tl.int64) * stride_os + offs_d[None, :], o.to(O.dtype.element_ty),
             mask=(offs_m < S)[:, None] & (offs_d < D)[None, :])
    tl.store(LSE + bh.to(tl.int64) * S + offs_m, m_i + tl.math.log2(l_i), mask=offs_m < S)


@triton.jit
def _delta_kernel(O, DO, DELTA, stride_ob, stride_oh, stride_os, stride_db, stride_dh, stride_ds, H, S,
                  D: tl.constexpr, HEAD_DIM: tl.constexpr, BM: tl.constexpr):
    """delta = rowsum(O * dO) per query row, fp32."""
    bh = tl.program_id(1)
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, HEAD_DIM)
    mask = (offs_m < S)[:, None] & (offs_d < D)[None, :]
    rows = offs_m[:, None].to(tl.int64)
    o = tl.load(O + b * stride_ob + h * stride_oh + rows * stride_os + offs_d[None, :], mask=mask, other=0.0)
    do = tl.load(DO + b * stride_db + h * stride_dh + rows * stride_ds + offs_d[None, :], mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(DELTA + bh.to(tl.int64) * S + offs_m, delta, mask=offs_m < S)


@triton.jit
def _dkdv_block(dk, dv, k, v, q_src, do_src, b, h, lse_base, delta_base, stride_qs, stride_gs, lo, hi, offs_n,
                offs_m, offs_d, S, qk_scale, D: tl.constexpr, HEAD_DIM: tl.constexpr, BM: tl.constexpr,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
                TMA: tl.constexpr):
    """dK, dV contributions of query blocks [lo, hi); MASKED applies the sequence end and (CAUSAL) the diagonal."""
    for start in range(lo, hi, BM):
        rows = start + offs_m
        q = _tile(q_src, b, h, start, offs_m, stride_qs, offs_d, S, D, HEAD_DIM, BM, MASKED, TMA)  # [BM, HEAD_DIM]
        do = _tile(do_src, b, h, start, offs_m, stride_gs, offs_d, S, D, HEAD_DIM, BM, MASKED, TMA)
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        if MASKED:
            lse = tl.load(lse_base + rows, mask=rows < S, other=0.0)
            delta = tl.load(delta_base + rows, mask=rows < S, other=0.0)
        else:
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        qkt = tl.dot(k, tl.trans(q), input_precision=PRECISION)  # [BN, BM]
        pt = tl.math.exp2(qkt * qk_scale - lse[None, :])
        if MASKED:
            keep = (rows < S)[None, :]
            if CAUSAL:
                keep = keep & (rows[None, :] >= offs_n[:, None])
            pt = tl.where(keep, pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # [BN, BM]
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PRECISION)
    return dk, dv


@triton.autotune(configs=_configs(DKDV_TILES), key=["S", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _bwd_prune}, do_bench=quick_bench)
@triton.jit
def _dkdv_kernel(Q, K, V, DO, Q_TMA, K_TMA, V_TMA, DO_TMA, LSE, DELTA, DK, DV, stride_qb, stride_qh, stride_qs,
                 stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, stride_gb, stride_gh, stride_gs,
                 H, S, qk_scale, sm_scale,
                 D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                 PRECISION: tl.constexpr, HEAD_GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 TMA: tl.constexpr):
    """dV = P^T dO and dK = dS^T Q * scale for one block of BN keys, over the query blocks that see them: the
    ones crossing the diagonal (causal) and the sequence end masked, the rest not. dO, dK and dV share strides
    (stride_g*): they are made contiguous like q."""
    blk, bh = _block_index(tl.cdiv(S, BN), CAUSAL, False, HEAD_GROUP)  # the first key blocks see the most queries
    start_n = blk * BN
    b, h = bh // H, bh % H
    offs_n = start_n + tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    offs_d = tl.arange(0, HEAD_DIM)
    k_src = _source(K, K_TMA, b, h, stride_kb, stride_kh, TMA)
    v_src = _source(V, V_TMA, b, h, stride_vb, stride_vh, TMA)
    k = _tile(k_src, b, h, start_n, tl.arange(0, BN), stride_ks, offs_d, S, D, HEAD_DIM, BN, True, TMA)  # [BN, HD]
    v = _tile(v_src, b, h, start_n, tl.arange(0, BN), stride_vs, offs_d, S, D, HEAD_DIM, BN, True, TMA)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    q_src = _source(Q, Q_TMA, b, h, stride_qb, stride_qh, TMA)
    do_src = _source(DO, DO_TMA, b, h, stride_gb, stride_gh, TMA)
    stats = bh.to(tl.int64) * S
    dk = tl.zeros([BN, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BN, HEAD_DIM], dtype=tl.float32)
    full_end = (S // BM) * BM  # query blocks from here on cross the sequence end
    if CAUSAL:  # queries above the diagonal never see these keys; blocks crossing it are masked
        lo = (start_n // BM) * BM
        mid = tl.minimum(lo + tl.cdiv(start_n + BN - lo, BM) * BM, tl.maximum(full_end, lo))
    else:
        lo = 0
        mid = 0
    dk, dv = _dkdv_block(dk, dv, k, v, q_src, do_src, b, h, LSE + stats, DELTA + stats, stride_qs, stride_gs, lo,
                         mid, offs_n, offs_m, offs_d, S, qk_scale, D, HEAD_DIM, BM, True, CAUSAL, UPCAST, PRECISION,
                         TMA)
    dk, dv = _dkdv_block(dk, dv, k, v, q_src, do_src, b, h, LSE + stats, DELTA + stats, stride_qs, stride_gs, mid,
                         tl.maximum(mid, full_end), offs_n, offs_m, offs_d, S, qk_scale, D, HEAD_DIM, BM, False,
                         CAUSAL, UPCAST, PRECISION, TMA)
    dk, dv = _dkdv_block(dk, dv, k, v, q_src, do_src, b, h, LSE + stats, DELTA + stats, stride_qs, stride_gs,
                         tl.maximum(mid, full_end), S, offs_n, offs_m, offs_d, S, qk_scale, D, HEAD_DIM, BM, True,
                         CAUSAL, UPCAST, PRECISION, TMA)
    kv_mask = (offs_n < S)[:, None] & (offs_d < D)[None, :]
    g_base = (b.to(tl.int64) * stride_gb + h.to(tl.int64) * stride_gh + offs_n[:, None].to(tl.int64) * stride_gs
              + offs_d[None, :])
    tl.store(DK + g_base, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + g_base, dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_block(dq, q, do, lse, delta, k_src, v_src, b, h, stride_ks, stride_vs, lo, hi, offs_m, offs_n, offs_d, S,
              qk_scale, D: tl.constexpr, HEAD_DIM: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
              CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr):
    """dQ contributions of key blocks [lo, hi); MASKED applies the sequence end and (CAUSAL) the diagonal."""
    for start in range(lo, hi, BN):
        cols = start + offs_n
        k = _tile(k_src, b, h, start, offs_n, stride_ks, offs_d, S, D, HEAD_DIM, BN, MASKED, TMA)  # [BN, HEAD_DIM]
        v = _tile(v_src, b, h, start, offs_n, stride_vs, offs_d, S, D, HEAD_DIM, BN, MASKED, TMA)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)  # [BM, BN]
        p = tl.math.exp2(qk * qk_scale - lse[:, None])
        if MASKED:
            keep = (cols < S)[None, :] & (offs_m < S)[:, None]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # [BM, BN]
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)
    return dq


@triton.autotune(configs=_configs(DQ_TILES), key=["S", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _dq_prune}, do_bench=quick_bench)
@triton.jit
def _dq_kernel(Q, K, V, DO, Q_TMA, K_TMA, V_TMA, DO_TMA, LSE, DELTA, DQ, stride_qb, stride_qh, stride_qs,
               stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, stride_gb, stride_gh, stride_gs,
               H, S, qk_scale, sm_scale,
               D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
               PRECISION: tl.constexpr, HEAD_GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
               TMA: tl.constexpr):
    """dQ = dS K * scale for one block of BM queries, over the key blocks they see (the diagonal and the
    sequence end masked, the rest not)."""
    blk, bh = _block_index(tl.cdiv(S, BM), CAUSAL, True, HEAD_GROUP)
    start_m = blk * BM
    b, h = bh // H, bh % H
    offs_m = start_m + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < S
    q_src = _source(Q, Q_TMA, b, h, stride_qb, stride_qh, TMA)
    do_src = _source(DO, DO_TMA, b, h, stride_gb, stride_gh, TMA)
    q = _tile(q_src, b, h, start_m, tl.arange(0, BM), stride_qs, offs_d, S, D, HEAD_DIM, BM, True, TMA)
    do = _tile(do_src, b, h, start_m, tl.arange(0, BM), stride_gs, offs_d, S, D, HEAD_DIM, BM, True, TMA)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    stats = bh.to(tl.int64) * S
    lse = tl.load(LSE + stats + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + stats + offs_m, mask=row_ok, other=0.0)
    k_src = _source(K, K_TMA, b, h, stride_kb, stride_kh, TMA)
    v_src = _source(V, V_TMA, b, h, stride_vb, stride_vh, TMA)
    dq = tl.zeros([BM, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:  # keys right of the diagonal are never seen; BN divides BM, so [0, start_m) is whole blocks
        full_end = start_m
        end = tl.minimum(start_m + BM, S)
    else:
        full_end = (S // BN) * BN
        end = S
    dq = _dq_block(dq, q, do, lse, delta, k_src, v_src, b, h, stride_ks, stride_vs, 0, full_end, offs_m, offs_n,
                   offs_d, S, qk_scale, D, HEAD_DIM, BN, False, CAUSAL, UPCAST, PRECISION, TMA)
    dq = _dq_block(dq, q, do, lse, delta, k_src, v_src, b, h, stride_ks, stride_vs, full_end, end, offs_m, offs_n,
                   offs_d, S, qk_scale, D, HEAD_DIM, BN, True, CAUSAL, UPCAST, PRECISION, TMA)
    tl.store(DQ + b.to(tl.int64) * stride_gb + h.to(tl.int64) * stride_gh + offs_m[:, None].to(tl.int64) * stride_gs
             + offs_d[None, :], (dq * sm_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None] & (offs_d < D)[None, :])


def _check(q, k, v):
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must share one [batch, heads, seq, head_dim] shape; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if not 1 <= q.shape[-1] <= 128:
        raise ValueError(f"head_dim {q.shape[-1]} is outside 1..128")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    check_dtype(q)


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _meta(q: torch.Tensor) -> dict:
    d = q.shape[-1]
    return dict(D=d, HEAD_DIM=max(16, triton.next_power_of_2(d)),
                UPCAST=INTERPRETED and q.dtype != torch.float32,
                PRECISION="ieee" if q.dtype == torch.float32 else "tf32", HEAD_GROUP=HEAD_GROUP)


def _probe_tma(device: torch.device) -> None:
    """Once per process on a CUDA device of compute capability 9 or more: run the forward at a small shape with
    descriptors and with pointers; unless both run and agree, TMA configs are never tried."""
    global _TMA_OK, TMA_ERROR
    if _TMA_OK is not None:
        return
    _TMA_OK = False
    if INTERPRETED or device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 9:
        return
    try:
        gen = torch.Generator(device=device).manual_seed(0)
        q, k, v = (torch.randn(1, 2, 80, 64, generator=gen, device=device).to(torch.bfloat16) for _ in range(3))
        descriptors = [_descriptor(t, 64, 64) for t in (q, k, v)]
        outs = []
        for tma in (True, False):
            o, lse = torch.empty_like(q), torch.empty(2, 80, dtype=torch.float32, device=device)
            _fwd_kernel.fn[(2, 2)](q, k, v, *descriptors, o, lse, *q.stride()[:3], *k.stride()[:3],
                                   *v.stride()[:3], *o.stride()[:3], 2, 80, LOG2E / 8, CAUSAL=True, BM=64, BN=64,
                                   TMA=tma, num_warps=4, num_stages=2, **_meta(q))
            outs.append(o.float())
        torch.cuda.synchronize(device)
        if not torch.allclose(outs[0], outs[1], rtol=1e-2, atol=1e-2):
            raise RuntimeError("descriptor and pointer loads disagree")
        _TMA_OK = True
    except Exception as e:  # an older Triton or driver: pointer loads only
        TMA_ERROR = f"{type(e).__name__}: {e}"


def tma_status(device: torch.device) -> str:
    """Whether the autotuner may choose TMA descriptor loads on `device` ("available"), or why not."""
    _probe_tma(device)
    return "available" if _TMA_OK else "unavailable" + (f": {TMA_ERROR}" if TMA_ERROR else "")


def flash_attention_fwd(q, k, v, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """o [B, H, S, D] and the base-2 logsumexp [B*H, S] (fp32) of the scaled scores."""
    _check(q, k, v)
    _probe_tma(q.device)
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    bsz, heads, seq, _ = q.shape
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(bsz * heads, seq, dtype=torch.float32, device=q.device)  # [B*H, S]
    if q.numel() == 0:
        return o, lse
    meta = _meta(q)
    sm_scale = 1.0 / math.sqrt(q.shape[-1])
    grid = lambda m: (triton.cdiv(seq, m["BM"]), bsz * heads)
    _fwd_kernel[grid](q, k, v, *_descriptors(meta, q, k, v), o, lse, *q.stride()[:3], *k.stride()[:3],
                      *v.stride()[:3], *o.stride()[:3], heads, seq, sm_scale * LOG2E, CAUSAL=causal, **meta)
    return o, lse


def flash_attention_bwd(do, q, k, v, o, lse, causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _probe_tma(q.device)
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    do = do.contiguous()
    bsz, heads, seq, d = q.shape
    dq, dk, dv = (torch.empty_like(do) for _ in range(3))  # contiguous, strides of do
    if q.numel() == 0:
        return dq, dk, dv
    meta = _meta(q)
    delta = torch.empty_like(lse)  # [B*H, S]
    _delta_kernel[(triton.cdiv(seq, 64), bsz * heads)](o, do, delta, *o.stride()[:3], *do.stride()[:3], heads, seq,
                                                         D=d, HEAD_DIM=meta["HEAD_DIM"], BM=64)
    sm_scale = 1.0 / math.sqrt(d)
    tensors = (q, k, v, do, *_descriptors(meta, q, k, v, do))
    args = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], heads, seq, sm_scale * LOG2E,
            sm_scale)
    _dkdv_kernel[lambda m: (triton.cdiv(seq, m["BN"]), bsz * heads)](*tensors, lse, delta, dk, dv, *args,
                                                                      CAUSAL=causal, **meta)
    _dq_kernel[lambda m: (triton.cdiv(seq, m["BM"]), bsz * heads)](*tensors, lse, delta, dq, *args, CAUSAL=causal,
                                                                    **meta)
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        o, lse = flash_attention_fwd(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_bwd(do, q, k, v, o, lse, ctx.causal)
        return dq, dk, dv, None


def flash_attention(q, k, v, causal: bool = False) -> torch.Tensor:
    """Differentiable attention over q, k, v [batch, heads, seq, head_dim]."""
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return FlashAttention.apply(q, k, v, causal)
    return flash_attention_fwd(q, k, v, causal)[0]
