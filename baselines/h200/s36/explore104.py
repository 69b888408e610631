"""Session 36: the norm forwards at 768-wide rows with each row reduced inside one warp.

At 768-wide rows the library's forward (kernels/layernorm.py, kernels/rmsnorm.py) holds a [ROWS, 1024] tile. At
4 or 8 warps Triton lays it out with four warps across a row (sizePerThread [1, 8], warpsPerCTA [1, 4] or [2, 4];
read from the TTGIR of an offline sm_90 compile, s36/explore104-offline.txt), so each row reduction goes through
shared memory behind a barrier, two of them in layernorm. torch.compile's kernel is the same tile, and the two tie
at 16384 x 768 (17.2 us each in norms.jsonl), the one goal point layernorm's forward does not win outright. The
question: are those reductions what holds both at the tie?

Here each warp owns whole rows, so a row's sums are its own lanes' shuffles, with no shared memory and no
barrier: `_gluon_rows`, a [ROWS, KC, 256] tile (the row as KC chunks of 256 columns, 8 bf16 a lane, the last of
768's four chunks masked, as the library's 1024-wide block masks a quarter) in Gluon, whose layout is given
(warpsPerCTA [WARPS, 1, 1]). Plain Triton does not keep that layout: `_warp_rows` (the same tile) and `_uneven`
(unmasked [ROWS, 2, 256] and [ROWS, 1, 256] tiles) load with warps across the rows, but the compiler converts to
another layout through shared memory for the sums, barriers and all, except at one warp a program (the offline
report); they are compiled offline only, not timed. The library's autotuner can already pick one row and one warp
a program, its one warp-local layout.

Checked against a float64 reference (output pre-filled with NaN), then timed by bench.timing beside the library's
kernel, torch.compile of the suite's eager formula and a copy of the same bytes, three rounds in alternation.
GPU only; `--offline` compiles each variant (and the library's kernel) for sm_90 (Triton 3.6, no GPU) and prints
its layouts, barriers and registers.

Run from the repository root: python3 baselines/h200/s36/explore104.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s36/explore104.py --offline   (no GPU, Triton 3.6)
"""
from __future__ import annotations

import os
import re
import sys

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "s35"))

from explore101 import compile_sm90, emit, ptxas_info, shapes, start, time_rounds  # noqa: E402
from impls._compile import compile_fresh  # noqa: E402
from impls.layernorm import EPS as LN_EPS, layernorm_eager, reference as ln_reference  # noqa: E402
from impls.rmsnorm import EPS as RMS_EPS, reference as rms_reference, rmsnorm_eager  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

C = 256  # a chunk of _warp_rows and _uneven: one warp's 32 lanes x 8 bf16 (16 bytes a lane)


@triton.jit
def _warp_rows(X, W, B, Y, stride_x, stride_y, n_rows, n_cols: tl.constexpr, eps, LAYER: tl.constexpr,
               C: tl.constexpr, KC: tl.constexpr, ROWS: tl.constexpr):
    """Rows [pid * ROWS, pid * ROWS + ROWS) as one [ROWS, KC, C] tile (layernorm, or rmsnorm without B).
    Offline only (see the module docstring)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, KC)[None, :, None] * C + tl.arange(0, C)[None, None, :]  # [1, KC, C]
    col_ok = cols < n_cols
    mask = col_ok & (rows < n_rows)[:, None, None]
    rows64 = rows.to(tl.int64)[:, None, None]
    x = tl.load(X + rows64 * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if LAYER:
        mean = tl.sum(tl.sum(x, axis=2), axis=1) / n_cols  # [ROWS]
        xc = tl.where(mask, x - mean[:, None, None], 0.0)
        rstd = tl.math.rsqrt(tl.sum(tl.sum(xc * xc, axis=2), axis=1) / n_cols + eps)
        b = tl.load(B + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = xc * rstd[:, None, None] * w + b
    else:
        rstd = tl.math.rsqrt(tl.sum(tl.sum(x * x, axis=2), axis=1) / n_cols + eps)
        y = x * rstd[:, None, None] * w
    tl.store(Y + rows64 * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _uneven(X, W, B, Y, stride_x, stride_y, n_rows, n_cols: tl.constexpr, eps, LAYER: tl.constexpr,
            C: tl.constexpr, ROWS: tl.constexpr):
    """As _warp_rows for rows of exactly 3 * C columns: a [ROWS, 2, C] tile and a [ROWS, 1, C] one, unmasked
    columns."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = (rows < n_rows)[:, None, None]
    rows64 = rows.to(tl.int64)[:, None, None]
    ca = tl.arange(0, 2)[None, :, None] * C + tl.arange(0, C)[None, None, :]  # [1, 2, C]
    cb = 2 * C + tl.arange(0, 1)[None, :, None] * C + tl.arange(0, C)[None, None, :]  # [1, 1, C]
    xa = tl.load(X + rows64 * stride_x + ca, mask=row_ok, other=0.0).to(tl.float32)
    xb = tl.load(X + rows64 * stride_x + cb, mask=row_ok, other=0.0).to(tl.float32)
    wa = tl.load(W + ca, eviction_policy="evict_last").to(tl.float32)
    wb = tl.load(W + cb, eviction_policy="evict_last").to(tl.float32)
    if LAYER:
        mean = (tl.sum(tl.sum(xa, axis=2), axis=1) + tl.sum(tl.sum(xb, axis=2), axis=1)) / n_cols
        xa = xa - mean[:, None, None]
        xb = xb - mean[:, None, None]
        var = (tl.sum(tl.sum(xa * xa, axis=2), axis=1) + tl.sum(tl.sum(xb * xb, axis=2), axis=1)) / n_cols
        rstd = tl.math.rsqrt(var + eps)
        ya = xa * rstd[:, None, None] * wa + tl.load(B + ca, eviction_policy="evict_last").to(tl.float32)
        yb = xb * rstd[:, None, None] * wb + tl.load(B + cb, eviction_policy="evict_last").to(tl.float32)
    else:
        rstd = tl.math.rsqrt((tl.sum(tl.sum(xa * xa, axis=2), axis=1) + tl.sum(tl.sum(xb * xb, axis=2), axis=1))
                             / n_cols + eps)
        ya = xa * rstd[:, None, None] * wa
        yb = xb * rstd[:, None, None] * wb
    tl.store(Y + rows64 * stride_y + ca, ya.to(Y.dtype.element_ty), mask=row_ok)
    tl.store(Y + rows64 * stride_y + cb, yb.to(Y.dtype.element_ty), mask=row_ok)


@gluon.jit
def _gluon_rows(X, W, B, Y, stride_x, stride_y, n_rows, n_cols: gl.constexpr, eps, LAYER: gl.constexpr,
                KC: gl.constexpr, ROWS: gl.constexpr, WARPS: gl.constexpr):
    """As _warp_rows, a [ROWS, KC, 256] tile, with the layout given: each warp ROWS / WARPS whole rows, 8
    contiguous columns a lane in each chunk, so every reduction stays in its warp."""
    L: gl.constexpr = gl.BlockedLayout([1, 1, 8], [1, 1, 32], [WARPS, 1, 1], [2, 1, 0])
    LR: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L))  # [ROWS]
    LC: gl.constexpr = gl.SliceLayout(0, L)  # [KC, 256]
    rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=LR)
    cols = (gl.arange(0, KC, layout=gl.SliceLayout(1, LC))[:, None] * 256
            + gl.arange(0, 256, layout=gl.SliceLayout(0, LC))[None, :])  # [KC, 256]
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None, None] & col_ok[None, :, :]
    rows64 = rows.to(gl.int64)[:, None, None]
    x = gl.load(X + rows64 * stride_x + cols[None, :, :], mask=mask, other=0.0).to(gl.float32)
    w = gl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(gl.float32)[None, :, :]
    if LAYER:
        mean = gl.sum(gl.sum(x, axis=2), axis=1) / n_cols  # [ROWS]
        xc = gl.where(mask, x - mean[:, None, None], 0.0)
        rstd = gl.rsqrt(gl.sum(gl.sum(xc * xc, axis=2), axis=1) / n_cols + eps)
        b = gl.load(B + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(gl.float32)[None, :, :]
        y = xc * rstd[:, None, None] * w + b
    else:
        rstd = gl.rsqrt(gl.sum(gl.sum(x * x, axis=2), axis=1) / n_cols + eps)
        y = x * rstd[:, None, None] * w
    gl.store(Y + rows64 * stride_y + cols[None, :, :], y.to(Y.dtype.element_ty), mask=mask)


VARIANTS = [(r, w) for r in (2, 4, 8, 16) for w in (1, 2, 4, 8) if r >= w and r * 1024 // (32 * w) <= 64]
GLUON_VARIANTS = [(r, w) for w in (1, 2, 4, 8, 16) for r in (w, 2 * w)]  # 32 or 64 elements of x a lane


def launch(x, w, b, y, layer, rows_per_tile, warps):
    """_gluon_rows over x [rows, dim] into y."""
    n_rows, dim = x.shape
    _gluon_rows[(triton.cdiv(n_rows, rows_per_tile),)](
        x, w, b, y, x.stride(0), y.stride(0), n_rows, dim, LN_EPS if layer else RMS_EPS, LAYER=layer,
        KC=triton.next_power_of_2(triton.cdiv(dim, 256)), ROWS=rows_per_tile, WARPS=warps, num_warps=warps)
    return y


def reference(x, w, b, layer):
    """The suite's float64 reference of either norm."""
    if layer:
        return ln_reference(x.double(), w.double(), b.double())
    return rms_reference(x.double(), w.double())


def checked(out, shape, label, run, y, want):
    """Runs `run` into y pre-filled with NaN; emits its error relative to the reference's norm; True when under
    1e-2 (bf16 output) with every element written."""
    y.fill_(float("nan"))
    try:
        got = run()
        torch.cuda.synchronize()
    except Exception as e:
        emit(out, kind="check", shape=shape, call=label, error=f"{type(e).__name__}: {str(e)[:300]}")
        return False
    err = float((got.double() - want).norm() / want.norm())
    emit(out, kind="check", shape=shape, call=label, rel_err=err)
    return err == err and err < 1e-2


def main(path):
    out = start(path)
    for n_rows, dim in shapes([(1001, 768), (16384, 768), (65536, 768)]):
        g = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(n_rows, dim, device="cuda", generator=g) + 0.5).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device="cuda", generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device="cuda", generator=g)).bfloat16()
        y = torch.empty_like(x)
        copy_dst = torch.empty_like(x)
        for name, layer in (("layernorm", True), ("rmsnorm", False)):
            want = reference(x, w, b, layer)
            if layer:
                lib = lambda: LN.layernorm_fwd(x, w, b, LN_EPS, out=y, stats=False)[0]
                comp = compile_fresh(layernorm_eager)
                compiled = lambda comp=comp: comp(x, w, b)
            else:
                lib = lambda: RN.rmsnorm_fwd(x, w, RMS_EPS, out=y, stats=False)[0]
                comp = compile_fresh(rmsnorm_eager)
                compiled = lambda comp=comp: comp(x, w)
            calls = {"copy": lambda: copy_dst.copy_(x)}
            for label, run in ((f"{name} library", lib), (f"{name} compile", compiled)):
                if checked(out, [n_rows, dim], label, run, y, want):
                    calls[label] = run
            kernel = LN._layernorm_fwd_kernel if layer else RN._rmsnorm_fwd_kernel
            emit(out, kind="pick", shape=[n_rows, dim], call=f"{name} library", config=str(kernel.best_config))
            for r, wp in GLUON_VARIANTS:
                label = f"{name} gluon: {r} rows a tile, {wp} warps"
                run = lambda r=r, wp=wp, layer=layer: launch(x, w, b, y, layer, r, wp)
                if checked(out, [n_rows, dim], label, run, y, want):
                    calls[label] = run
            time_rounds(out, [n_rows, dim], calls)


def offline():
    """Compiles each variant at dim 768 for sm_90 (no GPU): its blocked layouts, bar.sync count, registers."""
    from triton.compiler import ASTSource

    print(f"triton {triton.__version__}, sm_90, dim 768, bf16")

    def report(label, fn, sig, consts, warps, source=ASTSource):
        kern = compile_sm90(fn, sig, consts, ("stride_x", "stride_y"), warps, source)
        print(f"{label}: bar.sync {kern.asm['ptx'].count('bar.sync')}, shared {kern.metadata.shared} B, "
              f"{'; '.join(ptxas_info(kern))}")
        for lay in sorted(set(re.findall(r"#ttg\.blocked<\{[^}]*\}>", kern.asm["ttgir"]))):
            print("   ", lay)

    for layer in (True, False):
        name = "layernorm" if layer else "rmsnorm"
        sig = {"X": "*bf16", "W": "*bf16", **({"B": "*bf16"} if layer else {}), "Y": "*bf16"}
        stats = {"MEAN": None, "RSTD": None} if layer else {"RSTD": None}
        lib_sig = {**sig, **dict.fromkeys(stats, "constexpr"), "stride_x": "i32", "stride_y": "i32",
                   "n_rows": "i32", "eps": "fp32"}
        own_sig = {"X": "*bf16", "W": "*bf16", "B": "*bf16" if layer else "constexpr", "Y": "*bf16",
                   "stride_x": "i32", "stride_y": "i32", "n_rows": "i32", "eps": "fp32"}
        no_bias = {} if layer else {"B": None}
        lib = LN._layernorm_fwd_kernel.fn if layer else RN._rmsnorm_fwd_kernel.fn
        for r, wp in ((4, 8), (4, 4), (8, 8), (2, 4)):
            report(f"{name} library: {r} rows a tile, {wp} warps", lib, lib_sig,
                   {**stats, "n_cols": 768, "BLOCK": 1024, "SINGLE": True, "ROWS": r, "STAGES": 1, "PASSES": False},
                   wp)
        for r, wp in GLUON_VARIANTS:
            report(f"{name} gluon: {r} rows a tile, {wp} warps", _gluon_rows, own_sig,
                   {"n_cols": 768, "LAYER": layer, "KC": 4, "ROWS": r, "WARPS": wp, **no_bias}, wp, source=None)
        for r, wp in VARIANTS:
            report(f"{name} warp_rows: {r} rows a tile, {wp} warps", _warp_rows, own_sig,
                   {"n_cols": 768, "LAYER": layer, "C": C, "KC": 4, "ROWS": r, **no_bias}, wp)
            report(f"{name} uneven: {r} rows a tile, {wp} warps", _uneven, own_sig,
                   {"n_cols": 768, "LAYER": layer, "C": C, "ROWS": r, **no_bias}, wp)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main([a for a in sys.argv[1:] if not a.startswith("--")][0])
