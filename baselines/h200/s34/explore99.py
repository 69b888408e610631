"""Session 34: the norm backwards at 16K-wide rows, each row split over a cluster of 2 or 4 CTAs that swap their
partial row sums through distributed shared memory (DSMEM), written in Gluon.

explore94 found that Triton 3.6 compiles no row reduction over a cluster (`num_ctas`), and explore97 that
swapping the sums through global memory between ordinary programs is 26-37% slower than the library. Gluon (in
Triton 3.6 as triton.experimental.gluon) takes layouts as written. Each row is a [CTAS, SHARE] tile whose tile row
k CTA k holds (the layout's CTA basis, cga_layout [[1, 0]] or [[1, 0], [2, 0]]), so the row sums over axis 1 stay
within a CTA. Two things Triton 3.6 does not do are written around: a reduction across CTAs (an assertion in
ReduceOpToLLVM) and a cross-CTA convert_layout (it lowers to `mapa` but fails LLVM's verifier on the pointer's
address space). So the swap is inline PTX: thread t < CTAS stores this CTA's two sums into CTA t's slot through
`st.shared::cluster`, the cluster meets at barrier.cluster (arrive.release / wait.acquire), and every thread adds
the CTAS slots in rank order, so every CTA gets the same sums. Slots alternate with the row's parity: a CTA writes
a slot again only two rows later, after a barrier its partner passed only once done reading it. The cluster meets
once before the first row, so no CTA writes into one not yet started. The next row's x and dy (PREFETCH rows
ahead) are loaded into registers before the current row's sums are swapped. dw (and db) are written as one fp32
partial row a cluster and summed by the library's sum_partials.

The first version (b6d2fb3) held every tensor replicated over the cluster (cga_layout [[0]]) and offset each CTA's
columns by its rank: Triton then stores a replicated tensor from one CTA only, so half of dx and of the partial
rows were never written (62 of 72 checks failed). The check now starts every output filled with NaN.

Checked against the library's dx, dw, db, then timed by bench.timing beside it, three rounds in alternation.
EXPLORE_NOSWAP=1 also times each variant without the swap (each CTA keeps its own share's sums, so dx is wrong):
what the exchange costs. EXPLORE_SHAPES / EXPLORE_VARIANTS / EXPLORE_ONLY narrow the run. GPU only (Hopper);
`--offline` compiles every variant for sm_90a instead and prints registers and spills.

Run from the repository root: python3 baselines/h200/s34/explore99.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s34/explore99.py --offline   (no GPU, Triton 3.6)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import sum_partials  # noqa: E402


@gluon.jit
def _swap2(a, b, slot):
    """(a, b) summed over the 2 CTAs of the cluster (xch: [slot 2][rank 2][value 2])."""
    return gl.inline_asm_elementwise(
        """{
        .shared .align 16 .f32 xch[8];
        .reg .b32 me, tid, base, mine, r;
        .reg .pred p;
        .reg .f32 a0, b0, a1, b1;
        mov.u32 me, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        mov.u32 base, xch;
        mad.lo.u32 base, $4, 16, base;
        mad.lo.u32 mine, me, 8, base;
        setp.lt.u32 p, tid, 2;
        @p mapa.shared::cluster.u32 r, mine, tid;
        @p st.shared::cluster.v2.f32 [r], {$2, $3};
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        ld.shared.v4.f32 {a0, b0, a1, b1}, [base];
        add.f32 $0, a0, a1;
        add.f32 $1, b0, b1;
        }""", "=f,=f,f,f,r", [a, b, slot], dtype=(gl.float32, gl.float32), is_pure=False, pack=1)


@gluon.jit
def _swap4(a, b, slot):
    """(a, b) summed over the 4 CTAs of the cluster in rank order (xch: [slot 2][rank 4][value 2])."""
    return gl.inline_asm_elementwise(
        """{
        .shared .align 16 .f32 xch[16];
        .reg .b32 me, tid, base, mine, r;
        .reg .pred p;
        .reg .f32 a0, b0, a1, b1, a2, b2, a3, b3;
        mov.u32 me, %cluster_ctarank;
        mov.u32 tid, %tid.x;
        mov.u32 base, xch;
        mad.lo.u32 base, $4, 32, base;
        mad.lo.u32 mine, me, 8, base;
        setp.lt.u32 p, tid, 4;
        @p mapa.shared::cluster.u32 r, mine, tid;
        @p st.shared::cluster.v2.f32 [r], {$2, $3};
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        ld.shared.v4.f32 {a0, b0, a1, b1}, [base];
        ld.shared.v4.f32 {a2, b2, a3, b3}, [base + 16];
        add.f32 a0, a0, a1;
        add.f32 a0, a0, a2;
        add.f32 $0, a0, a3;
        add.f32 b0, b0, b1;
        add.f32 b0, b0, b2;
        add.f32 $1, b0, b3;
        }""", "=f,=f,f,f,r", [a, b, slot], dtype=(gl.float32, gl.float32), is_pure=False, pack=1)


@gluon.jit
def _cluster_sync():
    """Every CTA of the cluster has started (DSMEM may be written) and got here."""
    gl.inline_asm_elementwise("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned; "
                              "mov.u32 $0, 0;", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _load_share(X, DY, row, last, cols, ok, stride_x, stride_dy):
    mask = ok & (row < last)
    row64 = row.to(gl.int64)
    return (gl.load(X + row64 * stride_x + cols, mask=mask, other=0.0),
            gl.load(DY + row64 * stride_dy + cols, mask=mask, other=0.0))


@gluon.jit
def _row_step(x, dy, W, MEAN, RSTD, DX, row, cols, ok, stride_dx, n_cols, dw, db, CTAS: gl.constexpr,
              LAYER: gl.constexpr, SWAP: gl.constexpr):
    """dx of one row from x and dy as loaded ([CTAS, SHARE] tiles, CTA k holding tile row k); returns dw and db
    with the row added."""
    rstd = gl.load(RSTD + row)
    xf = x.to(gl.float32)
    if LAYER:
        xhat = xf * rstd - gl.load(MEAN + row) * rstd
    else:
        xhat = xf * rstd
    dyf = dy.to(gl.float32)
    g = dyf * gl.load(W + cols, mask=ok, other=0.0).to(gl.float32)
    s2 = gl.sum(g * xhat, axis=1)  # [CTAS], this CTA's share in its own element
    s1 = gl.sum(g, axis=1) if LAYER else s2
    slot = row % 2
    if not SWAP:  # timing only: each CTA keeps its own share's sums (dx wrong)
        pass
    elif CTAS == 2:
        s1, s2 = _swap2(s1, s2, slot)
    else:
        s1, s2 = _swap4(s1, s2, slot)
    c2 = (s2 / n_cols)[:, None]
    if LAYER:
        dx = rstd * (g - (s1 / n_cols)[:, None] - xhat * c2)
    else:
        dx = rstd * (g - xhat * c2)
    gl.store(DX + row.to(gl.int64) * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=ok)
    dw = dw + dyf * xhat
    db = db + dyf
    return dw, db


@gluon.jit
def _norm_bwd_cluster(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy, stride_dx, n_rows,
                      n_cols, rows_per_range, SHARE: gl.constexpr, CTAS: gl.constexpr, WARPS: gl.constexpr,
                      PREFETCH: gl.constexpr, LAYER: gl.constexpr, SWAP: gl.constexpr = True):
    """Cluster c (program_id) takes rows [c * rows_per_range, ...); each row is a [CTAS, SHARE] tile whose row k
    CTA k holds (the layout's CTA basis), so the row sums (axis 1) stay within a CTA and the swap adds them up;
    PREFETCH rows' loads in flight ahead of the row being written."""
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
    xa, dya = _load_share(X, DY, first, last, cols, ok, stride_x, stride_dy)
    if PREFETCH == 1:
        for row in range(first, last):
            xb, dyb = _load_share(X, DY, row + 1, last, cols, ok, stride_x, stride_dy)
            dw, db = _row_step(xa, dya, W, MEAN, RSTD, DX, row, cols, ok, stride_dx, n_cols, dw, db, CTAS, LAYER,
                               SWAP)
            xa, dya = xb, dyb
    else:
        xb, dyb = _load_share(X, DY, first + 1, last, cols, ok, stride_x, stride_dy)
        for row in range(first, last):
            xc, dyc = _load_share(X, DY, row + 2, last, cols, ok, stride_x, stride_dy)
            dw, db = _row_step(xa, dya, W, MEAN, RSTD, DX, row, cols, ok, stride_dx, n_cols, dw, db, CTAS, LAYER,
                               SWAP)
            xa, dya = xb, dyb
            xb, dyb = xc, dyc
    gl.store(DW_PARTIAL + cluster.to(gl.int64) * n_cols + cols, dw, mask=ok)
    if LAYER:
        gl.store(DB_PARTIAL + cluster.to(gl.int64) * n_cols + cols, db, mask=ok)


def cluster_bwd(dy, x, w, stats, layer, ctas, warps, prefetch, clusters, fill=None, swap=True):
    """dx, dw (, db); with `fill` the outputs start filled with it (a check then sees every element written)."""
    n_rows, n_cols = x.shape
    per = triton.cdiv(n_rows, clusters)
    clusters = triton.cdiv(n_rows, per)
    dx = torch.empty_like(x)
    partials = torch.empty(2 if layer else 1, clusters, n_cols, dtype=torch.float32, device=x.device)
    if fill is not None:
        dx.fill_(fill)
        partials.fill_(fill)
    mean, rstd = stats if layer else (stats[0], stats[0])
    _norm_bwd_cluster[(clusters,)](x, w, dy, mean, rstd, dx, partials[0], partials[-1], x.stride(0), dy.stride(0),
                                   dx.stride(0), n_rows, n_cols, per,
                                   SHARE=triton.next_power_of_2(n_cols) // ctas, CTAS=ctas, WARPS=warps,
                                   PREFETCH=prefetch, LAYER=layer, SWAP=swap, num_warps=warps, num_ctas=ctas)
    return (dx, *sum_partials(partials, w.dtype))


def variants(sms):
    """(ctas, warps, prefetch, clusters) tried: one or two CTAs an SM."""
    out = []
    for ctas in (2, 4):
        for warps in (8, 16, 32):
            if 16384 // ctas // (32 * warps) < 8:
                continue
            for prefetch in (1, 2):
                for per_sm in (1, 2):
                    if per_sm * warps > 32:
                        continue
                    out.append((ctas, warps, prefetch, per_sm * sms // ctas))
    return out


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


SIGNATURE = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "MEAN": "*fp32", "RSTD": "*fp32", "DX": "*bf16",
             "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32",
             "n_rows": "i32", "n_cols": "i32", "rows_per_range": "i32", "SHARE": "constexpr", "CTAS": "constexpr",
             "WARPS": "constexpr", "PREFETCH": "constexpr", "LAYER": "constexpr"}  # both scripts' kernels


def compile_report(fn, attrs, combos):
    """Compiles fn for sm_90a at each (layer, ctas, warps, prefetch) and prints ptxas's registers and spills."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    print(f"triton {triton.__version__}, sm_90a")
    for layer, ctas, warps, prefetch in combos:
        consts = {"SHARE": 16384 // ctas, "CTAS": ctas, "WARPS": warps, "PREFETCH": prefetch, "LAYER": layer}
        src = GluonASTSource(fn=fn, signature=SIGNATURE, constexprs=consts, attrs=attrs)
        label = f"{'layernorm' if layer else 'rmsnorm'} {ctas} CTAs, {warps} warps, prefetch {prefetch}"
        try:
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_ctas": ctas})
        except Exception as e:
            print(label, "fails:", type(e).__name__, str(e)[:1500])
            continue
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "k.ptx"), "w") as f:
                f.write(k.asm["ptx"])
            log = subprocess.run([ptxas, "-arch=sm_90a", "-v", os.path.join(tmp, "k.ptx"), "-o",
                                  os.path.join(tmp, "k.o")], capture_output=True, text=True).stderr
        info = [ln.split(":", 1)[-1].strip() for ln in log.splitlines() if "registers" in ln or "spill" in ln]
        print(label + ":", "; ".join(info), "| cluster" if ".reqnctapercluster" in k.asm["ptx"] else "")


def offline():
    """Pointers only declared 16-byte aligned (the GPU run also has the integers' divisibility: see the README)."""
    attrs = {(i,): [["tt.divisibility", 16]] for i, k in enumerate(SIGNATURE.values()) if k.startswith("*")}
    combos = dict.fromkeys((layer, *v[:3]) for layer in (False, True) for v in variants(132))
    compile_report(_norm_bwd_cluster, attrs, combos)


def main(path):
    out = open(path, "w")
    dev = "cuda"
    set_benchmark(autotune_bench)  # as bench's worker does
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    only = os.environ.get("EXPLORE_ONLY")  # e.g. "rmsnorm": one norm
    shapes = [(1024, 16384), (4096, 16384)]
    if os.environ.get("EXPLORE_SHAPES"):  # e.g. "1024x16384"
        shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ["EXPLORE_SHAPES"].split(",")]
    keep = os.environ.get("EXPLORE_VARIANTS")  # e.g. "2,16,1,66;4,8,1,66"
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
            if only and name != only:
                continue
            want = [t.double() for t in lib()]
            calls[f"{name} library"] = lib
            tried = variants(sms)
            if keep:
                tried = [tuple(int(v) for v in k.split(",")) for k in keep.split(";")]
            for ctas, warps, prefetch, clusters in tried:
                label = f"{name} cluster {ctas}, {warps} warps, prefetch {prefetch}, {clusters} clusters"
                fn = (lambda layer=layer, stats=stats, v=(ctas, warps, prefetch, clusters):
                      cluster_bwd(dy, x, w, stats, layer, *v))
                try:
                    got = cluster_bwd(dy, x, w, stats, layer, ctas, warps, prefetch, clusters, fill=float("nan"))
                    torch.cuda.synchronize()
                except Exception as e:
                    emit(out, kind="check", shape=[rows, dim], call=label,
                         error=f"{type(e).__name__}: {str(e)[:300]}")
                    continue
                diffs = [float((a.double() - r).abs().max() / r.abs().max().clamp_min(1e-30))
                         for a, r in zip(got, want)]
                diff = max(diffs) if all(d == d for d in diffs) else float("inf")  # NaN: an element not written
                emit(out, kind="check", shape=[rows, dim], call=label, rel_diff_from_library=diffs)
                if diff < 2e-2:
                    calls[label] = fn
                    if os.environ.get("EXPLORE_NOSWAP"):  # the same without the swap: what the exchange costs
                        calls[label + ", no swap (dx wrong)"] = (
                            lambda layer=layer, stats=stats, v=(ctas, warps, prefetch, clusters):
                            cluster_bwd(dy, x, w, stats, layer, *v, swap=False))
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
