"""Device exploration for sessions 17+ (not part of the project), one function per experiment, each writing rows
to $OUT/explore17.jsonl as it goes: attnlazy (attention forward: lazy rescale, exponentials on the FMA pipe),
lnfwd (norm forwards at 16K-wide rows: lane-wise shifted sums), flush (what the L2 flush costs the timed call),
fwdpick (the forward autotuner's picks against direct timings), lnbwd (layernorm backward at wide rows: the
library's column split runs at 42-52% of the copy bandwidth, rmsnorm's backward 75-91%), smlong (softmax, few
long rows), attnfp32 (fp32 attention: IEEE against tf32x3).

GPU:  OUT=$OUT BUDGET=500 python3 explore17.py attnlazy fwdpick lnfwd   (then: flush lnbwd smlong)
CPU:  TRITON_INTERPRET=1 python explore17.py dry      (each variant once at a tiny shape, checked against float64)

Variants of `ln_bwd_parts` (PARTS programs a row range, each owning BLOCK / PARTS columns, reading the other
parts, L2 hits for all but one of the PARTS programs, for the row sums):
- SUMS 0: a tuple reduction of the other parts, then one of the own part (the library's);
  SUMS 1: the other parts' and the own part's terms added lane-wise, then two tl.sum (one reduction step a row);
  SUMS 2: the same, one tuple reduction.
- PARTS 2, 4; warps 4..32; the row loop pipelined (STAGES 2) or not; programs per SM 4 (the library's reduction_programs) or 8.
Also the library end to end (layernorm_bwd: the kernel plus the partial sums) and rmsnorm's for reference, at
16K-wide and 4K-wide rows.
"""
import json, os, sys, time

import torch
import triton
import triton.language as tl

T0 = time.time()
BUDGET = float(os.environ.get("BUDGET", 300))
DRY = sys.argv[1:] == ["dry"]
DEV = "cpu" if DRY else "cuda"
OUT = open(os.path.join(os.environ.get("OUT", "/tmp"), "explore17.jsonl"), "a")


def rec(**kw):
    kw["t"] = round(time.time() - T0, 1)
    OUT.write(json.dumps(kw) + "\n"); OUT.flush()
    print(json.dumps(kw), flush=True)


def bench(fn):
    if DRY:
        fn()
        return 1.0
    from triton.testing import do_bench
    try:
        return do_bench(fn, warmup=10, rep=40, return_mode="median")
    except Exception as e:
        print("ERR", type(e).__name__, str(e)[:300], flush=True)
        return float("nan")


def left():
    return BUDGET - (time.time() - T0)


@triton.jit
def _add2(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def _terms(x_row, dy_row, W, cols, ok, mean, rstd):
    xhat = tl.where(ok, (tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32) - mean) * rstd, 0.0)
    dy = tl.load(dy_row + cols, mask=ok, other=0.0).to(tl.float32)
    g = dy * tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
    return xhat, dy, g


@triton.jit
def ln_bwd_parts(X, W, DY, MEAN, RSTD, DX, DWP, DBP, stride, n_rows, n_cols, rows_per_program,
                 PART: tl.constexpr, PARTS: tl.constexpr, SUMS: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0) // PARTS
    part = tl.program_id(0) % PARTS
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    own = part * PART + tl.arange(0, PART)
    own_ok = own < n_cols
    dw = tl.zeros([PART], dtype=tl.float32)
    db = tl.zeros([PART], dtype=tl.float32)
    for row in tl.range(first, last, num_stages=STAGES):
        base = (first * 0 + row).to(tl.int64) * stride  # a tensor also in the interpreter
        x_row = X + base
        dy_row = DY + base
        dx_row = DX + base
        mean = tl.load(MEAN + row)
        rstd = tl.load(RSTD + row)
        a1 = tl.zeros([PART], dtype=tl.float32)
        a2 = tl.zeros([PART], dtype=tl.float32)
        for k in tl.static_range(1, PARTS):  # the other parts, the nearest first
            other = ((part + k) % PARTS) * PART + tl.arange(0, PART)
            xo, _, go = _terms(x_row, dy_row, W, other, other < n_cols, mean, rstd)
            a1 += go
            a2 += go * xo
        if SUMS == 0:
            s1, s2 = tl.reduce((a1, a2), 0, _add2)
        xhat, dy, g = _terms(x_row, dy_row, W, own, own_ok, mean, rstd)
        dw += dy * xhat
        db += dy
        if SUMS == 0:
            t1, t2 = tl.reduce((g, g * xhat), 0, _add2)
            c1 = s1 + t1
            c2 = s2 + t2
        elif SUMS == 1:
            c1 = tl.sum(a1 + g, axis=0)
            c2 = tl.sum(a2 + g * xhat, axis=0)
        else:
            c1, c2 = tl.reduce((a1 + g, a2 + g * xhat), 0, _add2)
        dx = rstd * (g - c1 / n_cols - xhat * (c2 / n_cols))
        tl.store(dx_row + own, dx.to(DX.dtype.element_ty), mask=own_ok)
    tl.store(DWP + pid.to(tl.int64) * n_cols + own, dw, mask=own_ok)
    tl.store(DBP + pid.to(tl.int64) * n_cols + own, db, mask=own_ok)


@triton.jit
def ln_bwd_reload(X, W, DY, MEAN, RSTD, DX, DWP, DBP, stride, n_rows, n_cols, rows_per_program,
                  BLOCK: tl.constexpr):
    """One program a row range, whole rows: the row's sums from x, dy, w (all dead after the reduction), then x,
    dy, w read again (L1 hits: 64 KB a 16K-wide bf16 row pair) for dx and the dw/db partials, so only dw and db
    stay live across the reduction (the library's one-program loop keeps g, xhat, dw and db: 288 B of spills a
    thread at 16 warps, sm_90 offline)."""
    pid = tl.program_id(0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(first, last):
        base = (first * 0 + row).to(tl.int64) * stride  # a tensor also in the interpreter
        mean = tl.load(MEAN + row)
        rstd = tl.load(RSTD + row)
        xhat, _, g = _terms(X + base, DY + base, W, cols, ok, mean, rstd)
        c1 = tl.sum(g, axis=0) / n_cols
        c2 = tl.sum(g * xhat, axis=0) / n_cols
        xhat, dy, g = _terms(X + base, DY + base, W, cols + 0 * row, ok, mean, rstd)  # again: not CSE'd
        dw += dy * xhat
        db += dy
        tl.store(DX + base + cols, (rstd * (g - c1 - xhat * c2)).to(DX.dtype.element_ty), mask=ok)
    tl.store(DWP + pid.to(tl.int64) * n_cols + cols, dw, mask=ok)
    tl.store(DBP + pid.to(tl.int64) * n_cols + cols, db, mask=ok)


def lnbwd(shapes=((1024, 16384), (4096, 16384), (16384, 16384), (4096, 4096), (16384, 4096))):
    from kernels import layernorm as L, rmsnorm as R
    from kernels._rows import reduction_programs, sm_count
    for n, d in shapes:
        if DRY:
            n, d = 7, 300
        x = torch.randn(n, d, device=DEV, dtype=torch.bfloat16)
        w, dy = torch.randn(d, device=DEV, dtype=torch.bfloat16), torch.randn(n, d, device=DEV, dtype=torch.bfloat16)
        mean, rstd = x.float().mean(-1), torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)
        dx = torch.empty_like(x)
        nbytes = 3 * n * d * 2
        ms = bench(lambda: L.layernorm_bwd(dy, x, w, mean, rstd))
        rec(kind="ln_bwd", shape=[n, d], impl="library", us=ms * 1e3, gbps=nbytes / ms / 1e6)
        ms = bench(lambda: R.rmsnorm_bwd(dy, x, w, rstd))
        rec(kind="ln_bwd", shape=[n, d], impl="rmsnorm library", us=ms * 1e3, gbps=(nbytes - 0) / ms / 1e6)
        block = triton.next_power_of_2(d)
        for per_sm in (4, 8):
            programs, rpp = reduction_programs(n, x.device, per_sm=per_sm)
            dwp, dbp = torch.empty(programs, d, device=DEV), torch.empty(programs, d, device=DEV)
            trials = [(p, s, w, 1) for p in (2, 4) for s in (0, 1, 2)
                      for w in ((4, 8) if block // p <= 2048 else (8, 16, 32))]
            trials += [(2, 1, w, 2) for w in ((4, 8) if block <= 4096 else (16, 32))]
            for parts, sums, warps, stages in trials:
                        if DRY and warps != 4:
                            continue
                        if left() < 0:
                            return
                        fn = lambda: ln_bwd_parts[(parts * programs,)](x, w, dy, mean, rstd, dx, dwp, dbp, x.stride(0),
                                                                       n, d, rpp, PART=block // parts, PARTS=parts,
                                                                       SUMS=sums, STAGES=stages, num_warps=warps)
                        ms = bench(fn)
                        rec(kind="ln_bwd", shape=[n, d], per_sm=per_sm, parts=parts, sums=sums, warps=warps, stages=stages,
                            us=ms * 1e3, gbps=nbytes / ms / 1e6)
                        if DRY:
                            xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
                            torch.nn.functional.layer_norm(xr, (d,), wr, None, 1e-5).backward(dy.double())
                            err = max((dx.double() - xr.grad).abs().max().item(),
                                      (dwp.double().sum(0) - wr.grad).abs().max().item())
                            assert err < 0.05, err
            for warps in ((4,) if DRY else ((8, 16) if block <= 4096 else (16, 32))):
                if left() < 0:
                    return
                fn = lambda: ln_bwd_reload[(programs,)](x, w, dy, mean, rstd, dx, dwp, dbp, x.stride(0), n, d, rpp,
                                                        BLOCK=block, num_warps=warps)
                ms = bench(fn)
                rec(kind="ln_bwd", shape=[n, d], per_sm=per_sm, reload=True, warps=warps, us=ms * 1e3,
                    gbps=nbytes / ms / 1e6)
                if DRY:
                    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
                    br = torch.zeros(d, dtype=torch.float64, requires_grad=True)
                    torch.nn.functional.layer_norm(xr, (d,), wr, br, 1e-5).backward(dy.double())
                    err = max((dx.double() - xr.grad).abs().max().item(),
                              (dwp.double().sum(0) - wr.grad).abs().max().item(),
                              (dbp.double().sum(0) - br.grad).abs().max().item())
                    assert err < 0.05, err
        if DRY:
            return


def fwdpick(shapes=((4096, 768), (16384, 768), (65536, 768), (4096, 4096), (16384, 4096), (1024, 16384)), repeats=4):
    """The forward kernels' autotuner: which config it picks, `repeats` times afresh (its own timings of each
    config), against do_bench of each config it considered, launched directly. Session 16's bench took ROWS 4 at
    8 warps for layernorm fwd 4096/16384 x 768 (21.8 us) where explore16 measured 4 warps faster (18.6 vs 22.6)."""
    from kernels import layernorm as L, rmsnorm as R
    from kernels._rows import row_block, row_grid
    for n, d in shapes:
        if DRY:
            n, d = 7, 300
        x = torch.randn(n, d, device=DEV, dtype=torch.bfloat16)
        w, b = torch.randn(d, device=DEV, dtype=torch.bfloat16), torch.randn(d, device=DEV, dtype=torch.bfloat16)
        y, mean, rstd = torch.empty_like(x), torch.empty(n, device=DEV), torch.empty(n, device=DEV)
        block, single = row_block(d)
        nbytes = 2 * n * d * 2
        for name, tuner, call, args in (
                ("ln_fwd", L._layernorm_fwd_kernel, lambda: L.layernorm_fwd(x, w, b),
                 (x, w, b, y, mean, rstd, x.stride(0), y.stride(0), n, d, 1e-5)),
                ("rms_fwd", R._rmsnorm_fwd_kernel, lambda: R.rmsnorm_fwd(x, w),
                 (x, w, y, rstd, x.stride(0), y.stride(0), n, d, 1e-6))):
            if left() < 0:
                return
            seen = {}
            library_bench = tuner._do_bench
            for i in range(repeats):
                # the first half with the library's benchmark (5 ms warmup a config), the rest with Triton's
                # default 25 ms: a config timed while clocks still ramp after its compile would read slow
                warm = 5 if i < repeats // 2 else 25
                tuner._do_bench = lambda fn, quantiles=None, warm=warm, **_: triton.testing.do_bench(
                    fn, warmup=warm, rep=20, quantiles=quantiles)
                tuner.__dict__.pop("do_bench", None)  # where do_bench is a cached_property (some Triton versions)
                tuner.cache.clear()
                call()
                if DRY:
                    seen = {"dry": triton.Config({"ROWS": 2, "STAGES": 1}, num_warps=4)}
                    break
                cfg = tuner.best_config
                timings = {str(c): round(t[0] * 1e3, 2) for c, t in getattr(tuner, "configs_timings", {}).items()}
                seen.update({str(c): c for c in getattr(tuner, "configs_timings", {})})
                rec(kind="fwdpick", name=name, shape=[n, d], repeat=i, warmup_ms=warm, pick=str(cfg),
                    autotune_us=timings)
            tuner._do_bench = library_bench
            tuner.__dict__.pop("do_bench", None)
            # and configs the prune never offers (it keeps 16 or 32 elements a thread): Inductor's persistent
            # reductions at 768-wide rows may run one row a program with a few elements a thread (unverified)
            extra = {} if DRY or not single else {
                f"pruned ROWS={r} warps={w}": triton.Config({"ROWS": r, "STAGES": 1}, num_warps=w)
                for r in (1, 2, 4) for w in (2, 4, 8, 16) if 2 <= r * block // (32 * w) <= 32
                and not any(c.kwargs["ROWS"] == r and c.kwargs["STAGES"] == 1 and c.num_warps == w
                            for c in seen.values())}
            for key, c in {**seen, **extra}.items():
                if left() < 0:
                    return
                fn = lambda: tuner.fn[row_grid(n, x.device)](*args, BLOCK=block, SINGLE=single, num_warps=c.num_warps,
                                                            num_stages=c.num_stages, **c.kwargs)
                ms = bench(fn)
                rec(kind="fwdpick", name=name, shape=[n, d], config=key, us=ms * 1e3, gbps=nbytes / ms / 1e6)
        if DRY:
            return


def attnfp32(shapes=((8, 16, 4096, 64), (8, 16, 4096, 128)), causal=True):
    """fp32 attention forward: the library's IEEE products (FP32_TILES, CUDA cores; 20-35% of SDPA's TFLOP/s at
    head_dim >= 64 in session 16's sweep) against tf32x3 (three TF32 tensor-core products, about fp32-exact) on
    larger tiles; compiled for sm_90 offline tf32x3 spills 88-1152 B a thread in the forward. Error against
    float64 on the first head (the suite's fp32 tolerance is 1e-5 relative)."""
    import math
    from kernels import attention as A
    for bsz, heads, seq, d in shapes:
        if DRY:
            bsz, heads, seq, d = 1, 2, 40, 16
        q, k, v = (torch.randn(bsz, heads, seq, d, device=DEV) for _ in range(3))
        flops = 4 * bsz * heads * seq * seq * d / (2 if causal else 1)
        ref = torch.nn.functional.scaled_dot_product_attention(q[:1, :1].double(), k[:1, :1].double(),
                                                               v[:1, :1].double(), is_causal=causal)
        if not DRY:
            ms = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
            rec(kind="attn_fp32", shape=[bsz, heads, seq, d], impl="sdpa", us=ms * 1e3, tflops=flops / ms / 1e9)
        meta = A._meta(q)
        o, lse = torch.empty_like(q), torch.empty(bsz * heads, seq, device=DEV)
        tiles = [(64, 32, 8, 2), (32, 32, 4, 2), (64, 64, 4, 3), (128, 64, 8, 3), (64, 64, 8, 2)]
        for prec in ("ieee", "tf32x3"):
            for bm, bn, warps, stages in (tiles[:1] if DRY else tiles):
                if left() < 0:
                    return
                fn = lambda: A._fwd_kernel.fn[(triton.cdiv(seq, bm), bsz * heads)](
                    q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], bsz, heads,
                    seq, A.LOG2E / math.sqrt(d), CAUSAL=causal, BM=bm, BN=bn, TMA=False, num_warps=warps,
                    num_stages=stages, **{**meta, "PRECISION": prec})
                ms = bench(fn)
                err = ((o[:1, :1].double() - ref).abs().max() / ref.abs().max()).item()
                rec(kind="attn_fp32", shape=[bsz, heads, seq, d], precision=prec, tile=[bm, bn, warps, stages],
                    us=ms * 1e3, tflops=flops / ms / 1e9, rel_err=err)
        if DRY:
            return


from kernels.attention import _block_index, _source, _tile  # noqa: E402


@triton.jit
def _lazy_block(acc, l_i, m_i, q, k_src, v_src, b, h, stride_kn, stride_vn, lo, hi, offs_m, offs_n, offs_d, S,
                qk_scale, D: tl.constexpr, HEAD_DIM: tl.constexpr, BN: tl.constexpr, MASKED: tl.constexpr,
                CAUSAL: tl.constexpr, TMA: tl.constexpr, THRESH: tl.constexpr, POLY: tl.constexpr):
    """The library's _fwd_block, rescaling acc and l only when some row's max grew by more than 2^THRESH
    (program-wide branch); otherwise p = exp2(s - stale max) <= 2^THRESH."""
    for start in range(lo, hi, BN):
        cols = start + offs_n
        k = _tile(k_src, b, h, start, offs_n, stride_kn, offs_d, S, D, HEAD_DIM, BN, MASKED, TMA)
        v = _tile(v_src, b, h, start, offs_n, stride_vn, offs_d, S, D, HEAD_DIM, BN, MASKED, TMA)
        if DRY_UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            keep = cols[None, :] < S
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk, -float("inf"))
        m_blk = tl.max(qk, 1) * qk_scale
        if THRESH < 0:  # the library's: rescale at every block
            m_new = tl.maximum(m_i, m_blk)
            alpha = tl.math.exp2(m_i - m_new)
            acc = acc * alpha[:, None]
            l_i = l_i * alpha
            m_i = m_new
        elif tl.max(m_blk - m_i, 0) > THRESH:
            m_new = tl.maximum(m_i, m_blk)
            alpha = tl.math.exp2(m_i - m_new)
            acc = acc * alpha[:, None]
            l_i = l_i * alpha
            m_i = m_new
        x = qk * qk_scale - m_i[:, None]
        if POLY == 0:
            p = tl.math.exp2(x)
        elif POLY == 1:  # half the exponentials on the FMA pipe (FA4's trick), half on MUFU, every block
            p = _half_poly(x, BN)
        else:  # ... every other block: a quarter on the FMA pipe
            if (start // BN) % 2 == 1:
                p = _half_poly(x, BN)
            else:
                p = tl.math.exp2(x)
        l_i += tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def _half_poly(x, BN: tl.constexpr):
    """exp2 of x [BM, BN]: even columns on MUFU, odd ones by _exp2_poly (column pairs sit in one thread in the
    wgmma accumulator layout: the split and join move no data)."""
    a, c = tl.split(tl.reshape(x, [x.shape[0], BN // 2, 2]))
    return tl.reshape(tl.join(tl.math.exp2(a), _exp2_poly(c)), [x.shape[0], BN])


@triton.jit
def _exp2_poly(x):
    """2^x for x <= 0 on the FMA pipe alone (FA4's trick; tl.floor and float-to-int conversions run at MUFU's
    quarter rate on sm_90): adding 1.5 * 2^23 rounds x to an integer n in the low mantissa bits, 2^(x - n) by a
    cubic on [-0.5, 0.5] (minimax, rel err 1.0e-4, below bf16's 3.9e-3), n added to the exponent bits."""
    x = tl.maximum(x, -127.0)
    j = x + 12582912.0
    f = x - (j - 12582912.0)
    p = ((0.05500879 * f + 0.24221085) * f + 0.69328293) * f + 1.0
    return (p.to(tl.int32, bitcast=True) + (j.to(tl.int32, bitcast=True) << 23)).to(tl.float32, bitcast=True)


DRY_UPCAST = tl.constexpr(DRY)


@triton.jit
def _lazy_fwd(Q, K, V, O, LSE, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
              stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os, B, H, S, qk_scale,
              D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
              TMA: tl.constexpr, THRESH: tl.constexpr, POLY: tl.constexpr):
    blk, bh = _block_index(tl.cdiv(S, BM), CAUSAL)
    start_m = blk * BM
    b, h = bh // H, bh % H
    offs_m = start_m + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_DIM)
    q_src = _source(Q, b, h, B, H, S, stride_qb, stride_qh, stride_qs, D, HEAD_DIM, BM, TMA)
    q = _tile(q_src, b, h, start_m, tl.arange(0, BM), stride_qs, offs_d, S, D, HEAD_DIM, BM, True, TMA)
    if DRY_UPCAST:
        q = q.to(tl.float32)
    k_src = _source(K, b, h, B, H, S, stride_kb, stride_kh, stride_ks, D, HEAD_DIM, BN, TMA)
    v_src = _source(V, b, h, B, H, S, stride_vb, stride_vh, stride_vs, D, HEAD_DIM, BN, TMA)
    m_i = tl.full([BM], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        full_end = start_m
        end = tl.minimum(start_m + BM, S)
    else:
        full_end = (S // BN) * BN
        end = S
    acc, l_i, m_i = _lazy_block(acc, l_i, m_i, q, k_src, v_src, b, h, stride_ks, stride_vs, 0, full_end, offs_m,
                                offs_n, offs_d, S, qk_scale, D, HEAD_DIM, BN, False, CAUSAL, TMA, THRESH, POLY)
    acc, l_i, m_i = _lazy_block(acc, l_i, m_i, q, k_src, v_src, b, h, stride_ks, stride_vs, full_end, end, offs_m,
                                offs_n, offs_d, S, qk_scale, D, HEAD_DIM, BN, True, CAUSAL, TMA, THRESH, POLY)
    o = acc / l_i[:, None]
    o_base = O + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh
    tl.store(o_base + offs_m[:, None].to(tl.int64) * stride_os + offs_d[None, :], o.to(O.dtype.element_ty),
             mask=(offs_m < S)[:, None] & (offs_d < D)[None, :])
    tl.store(LSE + bh.to(tl.int64) * S + offs_m, m_i + tl.math.log2(l_i), mask=offs_m < S)


def attnlazy(shapes=((4, 32, 4096, 128), (1, 16, 16384, 64)), causal=True):
    """bf16 attention forward: the library (its autotuner's pick, and each tile launched directly) against the
    lazy rescale (THRESH 8: acc and l rescaled only when a row's max grew by more than 2^8; THRESH 0: whenever
    any grew), same tiles, pointers and TMA. Issue 9 wants 85% of SDPA at [4, 32, 4096, 128] (session 16: 81%)."""
    import math
    from kernels import attention as A
    dtype = torch.float32 if DRY else torch.bfloat16
    for bsz, heads, seq, d in shapes:
        if DRY:
            bsz, heads, seq, d = 1, 2, 100, 16
        q, k, v = (torch.randn(bsz, heads, seq, d, device=DEV, dtype=dtype) for _ in range(3))
        flops = 4 * bsz * heads * seq * seq * d / (2 if causal else 1)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if not DRY:
            ms = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
            rec(kind="attn_lazy", shape=[bsz, heads, seq, d], impl="sdpa", us=ms * 1e3, tflops=flops / ms / 1e9)
            ms = bench(lambda: A.flash_attention_fwd(q, k, v, causal))
            rec(kind="attn_lazy", shape=[bsz, heads, seq, d], impl="library", pick=str(A._fwd_kernel.best_config),
                us=ms * 1e3, tflops=flops / ms / 1e9)
        A._ready_tma(q.device)
        meta = A._meta(q)
        o, lse = torch.empty_like(q), torch.empty(bsz * heads, seq, device=DEV)
        # the last two: one warpgroup a CTA, two stages, so two CTAs share an SM (shared memory 96 / 80 KB) and
        # one's softmax may overlap the other's MMA (the library only, no variants)
        tiles = [(16, 16, 4, 1)] if DRY else [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 4), (128, 64, 4, 2),
                                              (64, 64, 4, 2)]
        for ti, (bm, bn, warps, stages) in enumerate(tiles):
            for tma in ((False, True) if A._TMA_OK else (False,)):
                for thresh, poly in ((None, 0), (8.0, 0), (0.0, 0), (8.0, 1), (8.0, 2), (-1.0, 2), (-1.0, 1)):
                    if thresh is not None and (not tma or ti >= 3) and not DRY:
                        continue  # variants with descriptors only (the library's picks at these shapes)
                    if left() < 0:
                        return
                    grid = (triton.cdiv(seq, bm), bsz * heads)
                    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
                    if thresh is None:
                        fn = lambda: A._fwd_kernel.fn[grid](q, k, v, o, lse, *strides, bsz, heads, seq,
                                                            A.LOG2E / math.sqrt(d), CAUSAL=causal, BM=bm, BN=bn,
                                                            TMA=tma, num_warps=warps, num_stages=stages, **meta)
                    else:
                        fn = lambda: _lazy_fwd[grid](q, k, v, o, lse, *strides, bsz, heads, seq,
                                                     A.LOG2E / math.sqrt(d), D=meta["D"], HEAD_DIM=meta["HEAD_DIM"],
                                                     CAUSAL=causal, BM=bm, BN=bn, TMA=tma, THRESH=thresh, POLY=poly,
                                                     num_warps=warps, num_stages=stages)
                    o.zero_()
                    ms = bench(fn)
                    err = ((o.float() - want.float()).norm() / want.float().norm()).item()
                    rec(kind="attn_lazy", shape=[bsz, heads, seq, d], tile=[bm, bn, warps, stages], tma=tma,
                        thresh=thresh, poly=poly, us=ms * 1e3, tflops=flops / ms / 1e9, rel_err=err)
                    if DRY:
                        assert err < (1e-4 if poly else 1e-5), err
        if DRY:
            return


def flush(sizes_mb=(16, 32, 64, 128, 256, 1024), reps=60):
    """How the L2 flush before each sample changes what memory-bound calls read at 16M-element sizes (issue 8's
    misses there; session 14: a 64 MB copy reached 76% of the 2 GB copy's bandwidth). bench/timing.py zeroes a
    buffer of 2x L2, which leaves up to an L2 of dirty lines that the timed call then writes back; a read of the
    buffer leaves it clean (but lets the call's own outputs stay in L2 unwritten). Copy (read + write) and the
    layernorm/rmsnorm forwards at 16M elements, timed by events after: zero, read, zero then read, none."""
    from kernels import layernorm as L, rmsnorm as R
    l2 = torch.cuda.get_device_properties(0).L2_cache_size if not DRY else 2**20
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=DEV)
    total = torch.empty((), dtype=torch.int64, device=DEV)
    flushes = {"zero": lambda: buf.zero_(), "read": lambda: torch.sum(buf, dim=0, out=total),
               "zero+read": lambda: (buf.zero_(), torch.sum(buf, dim=0, out=total)), "none": lambda: None}
    cases = []
    for mb in sizes_mb:
        n = (mb if not DRY else 1) * 2**20 // 2
        src, dst = torch.randn(n, device=DEV, dtype=torch.bfloat16), torch.empty(n, device=DEV, dtype=torch.bfloat16)
        cases.append((f"copy {mb} MB", 2 * n * 2, lambda src=src, dst=dst: dst.copy_(src)))
    for n, d in ((1024, 16384), (4096, 4096), (16384, 4096)):
        if DRY:
            n, d = 8, 64
        x = torch.randn(n, d, device=DEV, dtype=torch.bfloat16)
        w, b = torch.randn(d, device=DEV, dtype=torch.bfloat16), torch.randn(d, device=DEV, dtype=torch.bfloat16)
        cases.append((f"layernorm fwd {n}x{d}", 2 * n * d * 2, lambda x=x, w=w, b=b: L.layernorm_fwd(x, w, b)))
        cases.append((f"rmsnorm fwd {n}x{d}", 2 * n * d * 2, lambda x=x, w=w: R.rmsnorm_fwd(x, w)))
    for name, nbytes, call in cases:
        call()
        for mode, fl in flushes.items():
            if left() < 0:
                return
            if DRY:
                fl(); call()
                continue
            times = []
            for _ in range(reps):
                fl()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(20000)  # the host issues the call while the stream waits
                start.record(); call(); end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            ms = sorted(times)[len(times) // 2]
            rec(kind="flush", case=name, flush=mode, us=ms * 1e3, gbps=nbytes / ms / 1e6)
        if DRY:
            return


@triton.jit
def norm_fwd_lanes(X, W, B, Y, MEAN, RSTD, stride, n_cols, eps, C: tl.constexpr, RMS: tl.constexpr,
                   EVICT: tl.constexpr):
    """One row a program in C-wide chunks: each lane sums (x - shift) and its square (shift = the row's first
    element, against cancellation; rmsnorm: x^2 alone), one block reduction at the end, then x read again for the
    output. Session 16's lane Welford divided by a per-lane count at every element (a full-precision division:
    compute-bound at 4 TB/s); these are 3 FP32 ops an element. EVICT keeps the first pass's x in L2."""
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride
    y_row = Y + row * stride
    if RMS:
        shift = 0.0
    else:
        shift = tl.load(x_row).to(tl.float32)
    s1 = tl.zeros([C], dtype=tl.float32)
    s2 = tl.zeros([C], dtype=tl.float32)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        ok = cols < n_cols
        if EVICT:
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
        d = tl.where(ok, x - shift, 0.0)
        s1 += d
        s2 += d * d
    if RMS:
        mean = 0.0
        rstd = 1.0 / tl.sqrt(tl.sum(s2, 0) / n_cols + eps)
    else:
        mean_d = tl.sum(s1, 0) / n_cols
        var = tl.maximum(tl.sum(s2, 0) / n_cols - mean_d * mean_d, 0.0)
        mean = shift + mean_d
        rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        ok = cols < n_cols
        if EVICT:
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
        if RMS:
            y = x * rstd * w
        else:
            y = (x - mean) * rstd * w + tl.load(B + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=ok)
    if not RMS:
        tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


def lnfwd(shapes=((1024, 16384), (4096, 16384), (16384, 16384))):
    """Norm forwards at 16K-wide rows, where torch.compile (a looped reduction) was 6-9% (layernorm) and 1-2%
    (rmsnorm) faster than the library's whole row in registers (session 16): the library, compile of the eager
    formula, and norm_fwd_lanes at C 1024..4096, warps 2..16, with and without eviction hints."""
    from kernels import layernorm as L, rmsnorm as R
    from impls.layernorm import layernorm_eager
    from impls.rmsnorm import rmsnorm_eager
    for n, d in shapes:
        if DRY:
            n, d = 5, 3000
        x = torch.randn(n, d, device=DEV, dtype=torch.bfloat16) + 0.5
        w, b = torch.randn(d, device=DEV, dtype=torch.bfloat16), torch.randn(d, device=DEV, dtype=torch.bfloat16)
        nbytes = 2 * n * d * 2
        for rms in (False, True):
            name = "rms_fwd" if rms else "ln_fwd"
            want = rmsnorm_eager(x.double(), w.double()) if rms else layernorm_eager(x.double(), w.double(), b.double())
            if not DRY:
                lib = (lambda: R.rmsnorm_fwd(x, w)) if rms else (lambda: L.layernorm_fwd(x, w, b))
                ms = bench(lib)
                rec(kind="lnfwd", name=name, shape=[n, d], impl="library", us=ms * 1e3, gbps=nbytes / ms / 1e6)
                torch._dynamo.reset()
                comp = torch.compile(rmsnorm_eager if rms else layernorm_eager, dynamic=False)
                call = (lambda: comp(x, w)) if rms else (lambda: comp(x, w, b))
                call()
                ms = bench(call)
                rec(kind="lnfwd", name=name, shape=[n, d], impl="compile", us=ms * 1e3, gbps=nbytes / ms / 1e6)
            y, mean, rstd = torch.empty_like(x), torch.empty(n, device=DEV), torch.empty(n, device=DEV)
            trials = [(1024, 4, True)] if DRY else [(c, wp, ev) for c in (1024, 2048, 4096) for wp in (2, 4, 8, 16)
                                                     if 4 <= c // (32 * wp) <= 32 for ev in (False, True)]
            for c, warps, evict in trials:
                if left() < 0:
                    return
                fn = lambda: norm_fwd_lanes[(n,)](x, w, b, y, mean, rstd, x.stride(0), d, 1e-6 if rms else 1e-5, C=c,
                                                  RMS=rms, EVICT=evict, num_warps=warps)
                ms = bench(fn)
                err = ((y.double() - want).norm() / want.norm()).item()
                rec(kind="lnfwd", name=name, shape=[n, d], C=c, warps=warps, evict=evict, us=ms * 1e3,
                    gbps=nbytes / ms / 1e6, rel_err=err)
                if DRY:
                    assert err < 1e-2, err
        if DRY:
            return


from kernels.softmax import _span_max_sum, _span_softmax  # noqa: E402


@triton.jit
def softmax_rows(X, Y, stride, n_cols, C: tl.constexpr, STAGES: tl.constexpr, SCALAR: tl.constexpr):
    """One long row a program, in C-wide chunks (the library holds C at 16384 for rows longer than a block)."""
    row = tl.program_id(0).to(tl.int64)
    row_max, total = _span_max_sum(X + row * stride, 0, n_cols, C, STAGES, SCALAR)
    _span_softmax(X + row * stride, Y + row * stride, 0, n_cols, row_max, total, C, STAGES)


def smlong(shapes=((256, 65536), (64, 262144))):
    """Softmax forward, few long rows (issue 8: >= 80% of the copy bandwidth at 16M elements; session 16: 53% at
    256 x 65536, one program a row, C 16384, SCALAR, 32 warps; 41% at 64 x 262144, split in segments over two
    kernels): the library, one program a row at C 2048..16384, warps 4..32, STAGES 1..3, per-lane or scalar
    statistics; and the library's two-kernel split at 2..32 segments a row."""
    from kernels import softmax as SM
    for n, d in shapes:
        if DRY:
            n, d = 3, 20000
        x = torch.randn(n, d, device=DEV, dtype=torch.bfloat16)
        y = torch.empty_like(x)
        nbytes = 2 * n * d * 2
        want = torch.softmax(x.double(), -1)
        if not DRY:
            ms = bench(lambda: SM.softmax_fwd(x))
            rec(kind="smlong", shape=[n, d], impl="library", us=ms * 1e3, gbps=nbytes / ms / 1e6)
            ms = bench(lambda: torch.softmax(x, -1))
            rec(kind="smlong", shape=[n, d], impl="builtin", us=ms * 1e3, gbps=nbytes / ms / 1e6)
        trials = [(4096, 4, 1, False)] if DRY else [
            (c, w, st, sc) for c in (2048, 4096, 8192, 16384) for w in (4, 8, 16, 32) if 4 <= c // (32 * w) <= 32
            for st in (1, 2, 3) for sc in (False, True)]
        for c, warps, stages, scalar in trials:
            if left() < 0:
                return
            ms = bench(lambda: softmax_rows[(n,)](x, y, x.stride(0), d, C=c, STAGES=stages, SCALAR=scalar,
                                                  num_warps=warps))
            err = ((y.double() - want).norm() / want.norm()).item()
            rec(kind="smlong", shape=[n, d], C=c, warps=warps, stages=stages, scalar=scalar, us=ms * 1e3,
                gbps=nbytes / ms / 1e6, rel_err=err)
            if DRY:
                assert err < 1e-2, err
        for segs in ((2,) if DRY else (2, 4, 8, 16, 32)):
            if left() < 0:
                return
            seg_len = triton.cdiv(triton.cdiv(d, segs), SM.SPLIT_CHUNK) * SM.SPLIT_CHUNK
            segs = triton.cdiv(d, seg_len)
            seg_max = torch.empty(n, segs, device=DEV)
            seg_sum = torch.empty_like(seg_max)

            def split():
                SM._softmax_seg_stats_kernel[(n, segs)](x, seg_max, seg_sum, x.stride(0), d, seg_len, segs,
                                                        C=SM.SPLIT_CHUNK, num_warps=8)
                SM._softmax_seg_out_kernel[(n, segs)](x, y, seg_max, seg_sum, x.stride(0), y.stride(0), d, seg_len,
                                                      segs, C=SM.SPLIT_CHUNK, SEGS=triton.next_power_of_2(segs),
                                                      num_warps=8)
            ms = bench(split)
            err = ((y.double() - want).norm() / want.norm()).item()
            rec(kind="smlong", shape=[n, d], segs=segs, us=ms * 1e3, gbps=nbytes / ms / 1e6, rel_err=err)
            if DRY:
                assert err < 1e-2, err
        if DRY:
            return


if __name__ == "__main__":
    if DRY:
        BUDGET = 1e9
        lnbwd()
        fwdpick()
        attnfp32()
        attnlazy()
        flush()
        lnfwd()
        smlong()
    else:
        print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
        for name in sys.argv[1:]:
            globals()[name]()
    print("done in", round(time.time() - T0), "s", flush=True)
