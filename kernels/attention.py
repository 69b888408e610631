"""FlashAttention-2 in Triton: softmax(Q K^T / sqrt(d) [+ causal mask]) V for q, k, v [batch, heads, seq, head_dim].

Forward: one program per (BLOCK_M query rows, batch x head); it walks the key/value blocks with an online
softmax in base 2 (running max m, running sum l, rescaled accumulator) and saves the logsumexp (base 2) per row.
The scores never leave registers. Key blocks below the diagonal (causal) or inside the sequence run without
masks; only the diagonal / last partial block is masked.

Backward recomputes the probabilities from the saved logsumexp: delta = rowsum(O * dO) first, then one kernel
per key block accumulating dK and dV over the query blocks that see it, and one per query block accumulating
dQ over its key blocks (two kernels instead of atomics). Any seq length (masked edges), head_dim 16..128 (padded
to a power of two), bf16 / fp16 with fp32 accumulation, fp32 with exact (IEEE) products. Tiles are autotuned.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels._autotune import INTERPRETED, quick_bench

LOG2E = 1.4426950408889634


def _configs(tiles):
    """(BM, BN, num_warps, num_stages) tiles; few, as each costs a compile per head_dim and dtype."""
    if INTERPRETED:
        return [triton.Config({"BM": 16, "BN": 16}, num_warps=4, num_stages=1)]
    return [triton.Config({"BM": m, "BN": n}, num_warps=w, num_stages=s) for m, n, w, s in tiles]


def _fwd_prune(configs, named_args, **kwargs):
    """The forward's causal split needs BM a multiple of BN; 128-wide tiles at head_dim 128 in fp32 spill."""
    d = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    fp32 = named_args["Q"].dtype == torch.float32
    kept = [c for c in configs if c.kwargs["BM"] % c.kwargs["BN"] == 0
            and not (fp32 and d >= 128 and c.kwargs["BM"] * c.kwargs["BN"] > 64 * 64)]
    return kept or configs[:1]


def _bwd_prune(configs, named_args, **kwargs):
    """fp32 tiles above 64 x 64 and head_dim 128 tiles above 64 x 128 run out of shared memory or spill."""
    d = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    fp32 = named_args["Q"].dtype == torch.float32
    area = lambda c: c.kwargs["BM"] * c.kwargs["BN"]
    kept = [c for c in configs if not ((fp32 and area(c) > 64 * 64) or (d >= 128 and area(c) > 64 * 128))]
    return kept or [min(configs, key=area)]


def _dq_prune(configs, named_args, **kwargs):
    """As the other backward kernels, and BN must divide BM (the causal split)."""
    kept = [c for c in _bwd_prune(configs, named_args, **kwargs) if c.kwargs["BM"] % c.kwargs["BN"] == 0]
    return kept or [min(configs, key=lambda c: c.kwargs["BN"])]


# (BM, BN, num_warps, num_stages): the best few of a sweep of 24 forward and 12 + 12 backward tiles on an H200
# (bf16, causal; [4, 32, 4096, 128] and [1, 16, 16384, 64]).
FWD_TILES = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 4), (64, 64, 4, 3), (128, 32, 4, 3)]
DKDV_TILES = [(64, 128, 8, 3), (32, 128, 4, 3), (64, 64, 4, 3), (32, 64, 4, 3)]
DQ_TILES = [(128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 2), (64, 32, 4, 3)]



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
def _fwd_block(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, lo, hi, offs_m, offs_n, offs_d, S, qk_scale,
               D: tl.constexpr, HEAD_DIM: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
               CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """Online softmax over key blocks [lo, hi); MASKED applies the sequence end and (CAUSAL) the diagonal."""
    for start in range(lo, hi, BN):
        cols = start + offs_n
        k = _load_rows(k_base, cols, stride_kn, offs_d, S, D, HEAD_DIM, MASKED)  # [BN, HEAD_DIM]
        v = _load_rows(v_base, cols, stride_vn, offs_d, S, D, HEAD_DIM, MASKED)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # [BM, BN], base-2 logits
        if MASKED:
            keep = cols[None, :] < S
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _block_index(n_blocks, CAUSAL: tl.constexpr):
    """(row block, batch x head) of this program. The grid is (blocks, batch x head), so the programs running at
    once mostly share a head's K and V through L2. Causal row blocks run last block first, so the longest key
    walks start first and the short ones fill the tail."""
    blk = tl.program_id(0)
    if CAUSAL:
        blk = n_blocks - 1 - blk
    return blk, tl.program_id(1)


@triton.autotune(configs=_configs(FWD_TILES), key=["S", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _fwd_prune}, do_bench=quick_bench)
@triton.jit
def _fwd_kernel(Q, K, V, O, LSE, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os, H, S, qk_scale,
                D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    blk, bh = _block_index(tl.cdiv(S, BM), CAUSAL)
    start_m = blk * BM
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_m = start_m + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_DIM)
    q = _load_rows(Q + b * stride_qb + h * stride_qh, offs_m, stride_qs, offs_d, S, D, HEAD_DIM, True)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    m_i = tl.full([BM], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:  # blocks left of this row block need no mask; the diagonal block(s) do
        full_end = start_m
        end = tl.minimum(start_m + BM, S)
    else:  # every block but a partial last one
        full_end = (S // BN) * BN
        end = S
    acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, 0, full_end, offs_m, offs_n,
                               offs_d, S, qk_scale, D, HEAD_DIM, BN, False, CAUSAL, UPCAST, PRECISION)
    acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs, full_end, end, offs_m,
                               offs_n, offs_d, S, qk_scale, D, HEAD_DIM, BN, True, CAUSAL, UPCAST, PRECISION)
    o = acc / l_i[:, None]
    o_base = O + b * stride_ob + h * stride_oh
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
def _dkdv_block(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qs, stride_gs, lo, hi, offs_n, offs_m,
                offs_d, S, qk_scale, D: tl.constexpr, HEAD_DIM: tl.constexpr, BM: tl.constexpr, MASKED: tl.constexpr,
                CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """dK, dV contributions of query blocks [lo, hi); MASKED applies the sequence end and (CAUSAL) the diagonal."""
    for start in range(lo, hi, BM):
        rows = start + offs_m
        q = _load_rows(q_base, rows, stride_qs, offs_d, S, D, HEAD_DIM, MASKED)  # [BM, HEAD_DIM]
        do = _load_rows(do_base, rows, stride_gs, offs_d, S, D, HEAD_DIM, MASKED)
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
def _dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                 stride_vb, stride_vh, stride_vs, stride_gb, stride_gh, stride_gs, H, S, qk_scale, sm_scale,
                 D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                 PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """dV = P^T dO and dK = dS^T Q * scale for one block of BN keys, over the query blocks that see them: the
    ones crossing the diagonal (causal) and the sequence end masked, the rest not. dO, dK and dV share strides
    (stride_g*): they are made contiguous like q."""
    start_n = tl.program_id(0) * BN  # the first key blocks see the most queries (causal) and start first
    bh = tl.program_id(1)
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_n = start_n + tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    offs_d = tl.arange(0, HEAD_DIM)
    k = _load_rows(K + b * stride_kb + h * stride_kh, offs_n, stride_ks, offs_d, S, D, HEAD_DIM, True)  # [BN, HD]
    v = _load_rows(V + b * stride_vb + h * stride_vh, offs_n, stride_vs, offs_d, S, D, HEAD_DIM, True)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    q_base = Q + b * stride_qb + h * stride_qh
    do_base = DO + b * stride_gb + h * stride_gh
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
    dk, dv = _dkdv_block(dk, dv, k, v, q_base, do_base, LSE + stats, DELTA + stats, stride_qs, stride_gs, lo, mid,
                         offs_n, offs_m, offs_d, S, qk_scale, D, HEAD_DIM, BM, True, CAUSAL, UPCAST, PRECISION)
    dk, dv = _dkdv_block(dk, dv, k, v, q_base, do_base, LSE + stats, DELTA + stats, stride_qs, stride_gs, mid,
                         tl.maximum(mid, full_end), offs_n, offs_m, offs_d, S, qk_scale, D, HEAD_DIM, BM, False,
                         CAUSAL, UPCAST, PRECISION)
    dk, dv = _dkdv_block(dk, dv, k, v, q_base, do_base, LSE + stats, DELTA + stats, stride_qs, stride_gs,
                         tl.maximum(mid, full_end), S, offs_n, offs_m, offs_d, S, qk_scale, D, HEAD_DIM, BM, True,
                         CAUSAL, UPCAST, PRECISION)
    kv_mask = (offs_n < S)[:, None] & (offs_d < D)[None, :]
    g_base = b * stride_gb + h * stride_gh + offs_n[:, None].to(tl.int64) * stride_gs + offs_d[None, :]
    tl.store(DK + g_base, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + g_base, dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_block(dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, lo, hi, offs_m, offs_n, offs_d, S,
              qk_scale, D: tl.constexpr, HEAD_DIM: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
              CAUSAL: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """dQ contributions of key blocks [lo, hi); MASKED applies the sequence end and (CAUSAL) the diagonal."""
    for start in range(lo, hi, BN):
        cols = start + offs_n
        k = _load_rows(k_base, cols, stride_ks, offs_d, S, D, HEAD_DIM, MASKED)  # [BN, HEAD_DIM]
        v = _load_rows(v_base, cols, stride_vs, offs_d, S, D, HEAD_DIM, MASKED)
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
def _dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
               stride_vb, stride_vh, stride_vs, stride_gb, stride_gh, stride_gs, H, S, qk_scale, sm_scale,
               D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
               PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """dQ = dS K * scale for one block of BM queries, over the key blocks they see (the diagonal and the
    sequence end masked, the rest not)."""
    blk, bh = _block_index(tl.cdiv(S, BM), CAUSAL)
    start_m = blk * BM
    b, h = (bh // H).to(tl.int64), (bh % H).to(tl.int64)
    offs_m = start_m + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < S
    q = _load_rows(Q + b * stride_qb + h * stride_qh, offs_m, stride_qs, offs_d, S, D, HEAD_DIM, True)
    do = _load_rows(DO + b * stride_gb + h * stride_gh, offs_m, stride_gs, offs_d, S, D, HEAD_DIM, True)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    stats = bh.to(tl.int64) * S
    lse = tl.load(LSE + stats + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + stats + offs_m, mask=row_ok, other=0.0)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    dq = tl.zeros([BM, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:  # keys right of the diagonal are never seen; BN divides BM, so [0, start_m) is whole blocks
        full_end = start_m
        end = tl.minimum(start_m + BM, S)
    else:
        full_end = (S // BN) * BN
        end = S
    dq = _dq_block(dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, 0, full_end, offs_m, offs_n, offs_d,
                   S, qk_scale, D, HEAD_DIM, BN, False, CAUSAL, UPCAST, PRECISION)
    dq = _dq_block(dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, full_end, end, offs_m, offs_n, offs_d,
                   S, qk_scale, D, HEAD_DIM, BN, True, CAUSAL, UPCAST, PRECISION)
    tl.store(DQ + b * stride_gb + h * stride_gh + offs_m[:, None].to(tl.int64) * stride_gs + offs_d[None, :],
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None] & (offs_d < D)[None, :])


def _check(q, k, v):
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must share one [batch, heads, seq, head_dim] shape; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if not 1 <= q.shape[-1] <= 128:
        raise ValueError(f"head_dim {q.shape[-1]} is outside 1..128")
    if q.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"dtype {q.dtype} is not supported (fp32, bf16, fp16)")


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _meta(q: torch.Tensor) -> dict:
    d = q.shape[-1]
    return dict(D=d, HEAD_DIM=max(16, triton.next_power_of_2(d)),
                UPCAST=INTERPRETED and q.dtype != torch.float32,
                PRECISION="ieee" if q.dtype == torch.float32 else "tf32")


def flash_attention_fwd(q, k, v, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """o [B, H, S, D] and the base-2 logsumexp [B*H, S] (fp32) of the scaled scores."""
    _check(q, k, v)
    q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
    bsz, heads, seq, _ = q.shape
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(bsz * heads, seq, dtype=torch.float32, device=q.device)  # [B*H, S]
    if q.numel() == 0:
        return o, lse
    sm_scale = 1.0 / math.sqrt(q.shape[-1])
    grid = lambda meta: (triton.cdiv(seq, meta["BM"]), bsz * heads)
    _fwd_kernel[grid](q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], heads, seq,
                      sm_scale * LOG2E, CAUSAL=causal, **_meta(q))
    return o, lse


def flash_attention_bwd(do, q, k, v, o, lse, causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
    args = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], heads, seq, sm_scale * LOG2E,
            sm_scale)
    _dkdv_kernel[lambda m: (triton.cdiv(seq, m["BN"]), bsz * heads)](q, k, v, do, lse, delta, dk, dv, *args,
                                                                      CAUSAL=causal, **meta)
    _dq_kernel[lambda m: (triton.cdiv(seq, m["BM"]), bsz * heads)](q, k, v, do, lse, delta, dq, *args,
                                                                    CAUSAL=causal, **meta)
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
