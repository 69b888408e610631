"""Session 34: explore99's cluster backwards with the swap overlapped: a row's sums are published (stored into
every CTA's slot, then barrier.cluster.arrive) as soon as they are made, and collected (barrier.cluster.wait,
then the slots read) one step later, after the next row's sums are made; the row's dx is written then.

explore99 showed the swap costing about 0.65 us a row when each CTA waited for it at once, and the loop without
it tying the library. Here each step i makes row i's sums and, in one inline PTX block (so that both halves name
the same shared array), waits for the phase row i - 1 published, reads row i - 1's slots, publishes row i's and
arrives; then it writes row i - 1's dx. Rows i - 1, i and PREFETCH more are held in registers as loaded. The
slots alternate with the row's parity: a CTA publishes into slot s again two steps later, after a wait its
partners passed only once they had read it. The loop runs one step past the last row: the first step waits for
nothing and the last publishes nothing (predicates of the same PTX block). Everything else (the
[CTAS, SHARE] tile split over the cluster, the checks from NaN, sum_partials) is explore99's.

Run from the repository root: python3 baselines/h200/s34/explore100.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s34/explore100.py --offline   (no GPU, Triton 3.6)
EXPLORE_SHAPES and EXPLORE_VARIANTS ("ctas,warps,prefetch,clusters;...") narrow the run; EXPLORE_RELAXED=1
also runs each 2-CTA variant with a relaxed arrive (timing only: see _exchange2_relaxed).
"""
from __future__ import annotations

import os
import sys
import time

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from explore99 import SIGNATURE, _cluster_sync, _load_share, compile_report, emit  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import sum_partials  # noqa: E402


@gluon.jit
def _exchange2(a, b, slot, wait, publish):
    """Waits (if `wait`) for the phase the previous step published and returns the sums in slot 1 - `slot`; then
    publishes (a, b) into slot `slot` of both CTAs and arrives (if `publish`). xch: [slot 2][rank 2][value 2]."""
    return gl.inline_asm_elementwise(
        """{
        .shared .align 16 .f32 xch[8];
        .reg .b32 me, tid, base, prev, mine, r;
        .reg .pred p, w, pub;
        .reg .f32 a0, b0, a1, b1;
        setp.ne.u32 w, $5, 0;
        setp.ne.u32 pub, $6, 0;
        mov.u32 me, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        mov.u32 base, xch;
        @w barrier.cluster.wait.acquire.aligned;
        xor.b32 prev, $4, 1;
        mad.lo.u32 prev, prev, 16, base;
        ld.shared.v4.f32 {a0, b0, a1, b1}, [prev];
        add.f32 $0, a0, a1;
        add.f32 $1, b0, b1;
        mad.lo.u32 mine, $4, 16, base;
        mad.lo.u32 mine, me, 8, mine;
        setp.lt.and.u32 p, tid, 2, pub;
        @p mapa.shared::cluster.u32 r, mine, tid;
        @p st.shared::cluster.v2.f32 [r], {$2, $3};
        @pub barrier.cluster.arrive.release.aligned;
        }""", "=f,=f,f,f,r,r,r", [a, b, slot, wait, publish], dtype=(gl.float32, gl.float32), is_pure=False,
        pack=1)


@gluon.jit
def _exchange2_relaxed(a, b, slot, wait, publish):
    """_exchange2 with a relaxed arrive: no ordering of this thread's earlier stores (dx, and the slot's own:
    so the partner may read a stale slot; the check says whether it did). Timing: what the release costs."""
    return gl.inline_asm_elementwise(
        """{
        .shared .align 16 .f32 xch[8];
        .reg .b32 me, tid, base, prev, mine, r;
        .reg .pred p, w, pub;
        .reg .f32 a0, b0, a1, b1;
        setp.ne.u32 w, $5, 0;
        setp.ne.u32 pub, $6, 0;
        mov.u32 me, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        mov.u32 base, xch;
        @w barrier.cluster.wait.acquire.aligned;
        xor.b32 prev, $4, 1;
        mad.lo.u32 prev, prev, 16, base;
        ld.shared.v4.f32 {a0, b0, a1, b1}, [prev];
        add.f32 $0, a0, a1;
        add.f32 $1, b0, b1;
        mad.lo.u32 mine, $4, 16, base;
        mad.lo.u32 mine, me, 8, mine;
        setp.lt.and.u32 p, tid, 2, pub;
        @p mapa.shared::cluster.u32 r, mine, tid;
        @p st.shared::cluster.v2.f32 [r], {$2, $3};
        @pub barrier.cluster.arrive.relaxed.aligned;
        }""", "=f,=f,f,f,r,r,r", [a, b, slot, wait, publish], dtype=(gl.float32, gl.float32), is_pure=False,
        pack=1)


@gluon.jit
def _exchange4(a, b, slot, wait, publish):
    """_exchange2 for 4 CTAs (xch: [slot 2][rank 4][value 2]), the slots summed in rank order."""
    return gl.inline_asm_elementwise(
        """{
        .shared .align 16 .f32 xch[16];
        .reg .b32 me, tid, base, prev, mine, r;
        .reg .pred p, w, pub;
        .reg .f32 a0, b0, a1, b1, a2, b2, a3, b3;
        setp.ne.u32 w, $5, 0;
        setp.ne.u32 pub, $6, 0;
        mov.u32 me, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        mov.u32 base, xch;
        @w barrier.cluster.wait.acquire.aligned;
        xor.b32 prev, $4, 1;
        mad.lo.u32 prev, prev, 32, base;
        ld.shared.v4.f32 {a0, b0, a1, b1}, [prev];
        ld.shared.v4.f32 {a2, b2, a3, b3}, [prev + 16];
        add.f32 a0, a0, a1;
        add.f32 a0, a0, a2;
        add.f32 $0, a0, a3;
        add.f32 b0, b0, b1;
        add.f32 b0, b0, b2;
        add.f32 $1, b0, b3;
        mad.lo.u32 mine, $4, 32, base;
        mad.lo.u32 mine, me, 8, mine;
        setp.lt.and.u32 p, tid, 4, pub;
        @p mapa.shared::cluster.u32 r, mine, tid;
        @p st.shared::cluster.v2.f32 [r], {$2, $3};
        @pub barrier.cluster.arrive.release.aligned;
        }""", "=f,=f,f,f,r,r,r", [a, b, slot, wait, publish], dtype=(gl.float32, gl.float32), is_pure=False,
        pack=1)


@gluon.jit
def _terms(x, dy, W, MEAN, RSTD, row, first, last, cols, ok, LAYER: gl.constexpr):
    """xhat, g = dy * w, dy (fp32) and rstd of one row's share (rstd 0 outside [first, last))."""
    valid = (row >= first) & (row < last)
    rstd = gl.load(RSTD + row, mask=valid, other=0.0)
    xf = x.to(gl.float32)
    if LAYER:
        xhat = xf * rstd - gl.load(MEAN + row, mask=valid, other=0.0) * rstd
    else:
        xhat = xf * rstd
    dyf = dy.to(gl.float32)
    return xhat, dyf * gl.load(W + cols, mask=ok, other=0.0).to(gl.float32), dyf, rstd


@gluon.jit
def _step(xp, dyp, xa, dya, W, MEAN, RSTD, DX, i, first, last, cols, ok, stride_dx, n_cols, dw, db,
          CTAS: gl.constexpr, LAYER: gl.constexpr, RELAXED: gl.constexpr):
    """Row i's sums made and published, row i - 1's collected and its dx written (none at the first step)."""
    xhat, g, dyf, rstd = _terms(xa, dya, W, MEAN, RSTD, i, first, last, cols, ok, LAYER)
    s2 = gl.sum(g * xhat, axis=1)
    s1 = gl.sum(g, axis=1) if LAYER else s2
    wait = (i > first).to(gl.int32)
    publish = (i < last).to(gl.int32)
    if CTAS == 2 and RELAXED:
        t1, t2 = _exchange2_relaxed(s1, s2, i % 2, wait, publish)
    elif CTAS == 2:
        t1, t2 = _exchange2(s1, s2, i % 2, wait, publish)
    else:
        t1, t2 = _exchange4(s1, s2, i % 2, wait, publish)
    prev = i - 1
    xhat, g, dyf, rstd = _terms(xp, dyp, W, MEAN, RSTD, prev, first, last, cols, ok,
                                  LAYER)  # zeros at the first step
    c2 = (t2 / n_cols)[:, None]
    if LAYER:
        dx = rstd * (g - (t1 / n_cols)[:, None] - xhat * c2)
    else:
        dx = rstd * (g - xhat * c2)
    gl.store(DX + prev.to(gl.int64) * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=ok & (prev >= first))
    dw = dw + dyf * xhat
    db = db + dyf
    return dw, db


@gluon.jit
def _norm_bwd_overlap(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy, stride_dx, n_rows,
                      n_cols, rows_per_range, SHARE: gl.constexpr, CTAS: gl.constexpr, WARPS: gl.constexpr,
                      PREFETCH: gl.constexpr, LAYER: gl.constexpr, RELAXED: gl.constexpr = False):
    L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [1, WARPS], [1, 0],
                                       [[1, 0]] if CTAS == 2 else [[1, 0], [2, 0]])
    cluster = gl.program_id(0)
    first = cluster * rows_per_range
    last = gl.minimum(first + rows_per_range, n_rows)
    cols = (gl.arange(0, CTAS, layout=gl.SliceLayout(1, L))[:, None] * SHARE
            + gl.arange(0, SHARE, layout=gl.SliceLayout(0, L))[None, :])
    ok = cols < n_cols
    dw = gl.zeros_like(cols, dtype=gl.float32)
    db = gl.zeros_like(cols, dtype=gl.float32)
    _cluster_sync()
    xp, dyp = _load_share(X, DY, first, first, cols, ok, stride_x, stride_dy)  # all masked: zeros, "row first - 1"
    xa, dya = _load_share(X, DY, first, last, cols, ok, stride_x, stride_dy)
    if PREFETCH == 1:
        for i in range(first, last + 1):
            xb, dyb = _load_share(X, DY, i + 1, last, cols, ok, stride_x, stride_dy)
            dw, db = _step(xp, dyp, xa, dya, W, MEAN, RSTD, DX, i, first, last, cols, ok, stride_dx, n_cols, dw, db,
                           CTAS, LAYER, RELAXED)
            xp, dyp = xa, dya
            xa, dya = xb, dyb
    else:
        xb, dyb = _load_share(X, DY, first + 1, last, cols, ok, stride_x, stride_dy)
        for i in range(first, last + 1):
            xc, dyc = _load_share(X, DY, i + 2, last, cols, ok, stride_x, stride_dy)
            dw, db = _step(xp, dyp, xa, dya, W, MEAN, RSTD, DX, i, first, last, cols, ok, stride_dx, n_cols, dw, db,
                           CTAS, LAYER, RELAXED)
            xp, dyp = xa, dya
            xa, dya = xb, dyb
            xb, dyb = xc, dyc
    gl.store(DW_PARTIAL + cluster.to(gl.int64) * n_cols + cols, dw, mask=ok)
    if LAYER:
        gl.store(DB_PARTIAL + cluster.to(gl.int64) * n_cols + cols, db, mask=ok)


def overlap_bwd(dy, x, w, stats, layer, ctas, warps, prefetch, clusters, fill=None, relaxed=False):
    n_rows, n_cols = x.shape
    per = triton.cdiv(n_rows, clusters)
    clusters = triton.cdiv(n_rows, per)
    dx = torch.empty_like(x)
    partials = torch.empty(2 if layer else 1, clusters, n_cols, dtype=torch.float32, device=x.device)
    if fill is not None:
        dx.fill_(fill)
        partials.fill_(fill)
    mean, rstd = stats if layer else (stats[0], stats[0])
    _norm_bwd_overlap[(clusters,)](x, w, dy, mean, rstd, dx, partials[0], partials[-1], x.stride(0), dy.stride(0),
                                   dx.stride(0), n_rows, n_cols, per,
                                   SHARE=triton.next_power_of_2(n_cols) // ctas, CTAS=ctas, WARPS=warps,
                                   PREFETCH=prefetch, LAYER=layer, RELAXED=relaxed, num_warps=warps, num_ctas=ctas)
    return (dx, *sum_partials(partials, w.dtype))


VARIANTS = [(2, 16, 1, 66), (2, 32, 1, 66), (2, 16, 2, 66), (4, 8, 1, 66), (4, 8, 2, 66), (4, 16, 1, 33),
            (4, 16, 2, 33), (4, 8, 2, 33)]


def offline():
    attrs = {(i,): [["tt.divisibility", 16]] for i, (n, k) in enumerate(SIGNATURE.items())
             if k.startswith("*") or n in ("stride_x", "stride_dy", "stride_dx", "n_cols")}
    compile_report(_norm_bwd_overlap, attrs,
                   [(layer, *v) for layer in (False, True) for v in sorted({v[:3] for v in VARIANTS})])


def main(path):
    out = open(path, "w")
    dev = "cuda"
    set_benchmark(autotune_bench)  # as bench's worker does
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    shapes = [(1024, 16384), (4096, 16384)]
    if os.environ.get("EXPLORE_SHAPES"):
        shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ["EXPLORE_SHAPES"].split(",")]
    variants = VARIANTS
    if os.environ.get("EXPLORE_VARIANTS"):
        variants = [tuple(int(v) for v in k.split(",")) for k in os.environ["EXPLORE_VARIANTS"].split(";")]
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        calls = {}
        for name, layer, stats, lib in (("rmsnorm", False, (rstd,), lambda: RN.rmsnorm_bwd(dy, x, w, rstd)),
                                        ("layernorm", True, (mean, lrstd),
                                         lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd))):
            want = [t.double() for t in lib()]
            calls[f"{name} library"] = lib
            modes = (False, True) if os.environ.get("EXPLORE_RELAXED") else (False,)
            for ctas, warps, prefetch, clusters, relaxed in [v + (r,) for v in variants for r in modes
                                                             if not r or v[0] == 2]:
                label = f"{name} overlap {ctas}, {warps} warps, prefetch {prefetch}, {clusters} clusters"
                label += ", relaxed arrive" if relaxed else ""
                try:
                    got = overlap_bwd(dy, x, w, stats, layer, ctas, warps, prefetch, clusters, fill=float("nan"),
                                      relaxed=relaxed)
                    torch.cuda.synchronize()
                except Exception as e:
                    emit(out, kind="check", shape=[rows, dim], call=label,
                         error=f"{type(e).__name__}: {str(e)[:300]}")
                    continue
                diffs = [float((a.double() - r).abs().max() / r.abs().max().clamp_min(1e-30))
                         for a, r in zip(got, want)]
                diff = max(diffs) if all(d == d for d in diffs) else float("inf")  # NaN: an element not written
                emit(out, kind="check", shape=[rows, dim], call=label, rel_diff_from_library=diffs)
                if diff < 2e-2 or relaxed:  # relaxed: timed even if a stale slot was read
                    calls[label] = (lambda layer=layer, stats=stats, v=(ctas, warps, prefetch, clusters), r=relaxed:
                                    overlap_bwd(dy, x, w, stats, layer, *v, relaxed=r))
        for rnd in range(3):
            for name, fn in calls.items():
                t = time_call(fn, dev, TimingConfig())
                s = t.summary()
                emit(out, kind="time", round=rnd, shape=[rows, dim], call=name,
                     median_us=round(s["median_ms"] * 1e3, 3), n=s["n"], method=t.method)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main([a for a in sys.argv[1:] if not a.startswith("--")][0])
