"""Session 40: layernorm's backward at 16K-wide rows, one program a row range holding no row across its sums.

The library splits each 16K-wide row range over two programs (kernels.layernorm._layernorm_bwd_half), each owning
half the columns and reading the other half too, from L2, for the row's sums: at 16K-wide rows its backward runs
13-17% slower than rmsnorm's (H200, session 38: 129.8 against 110.7 us at 4096 x 16384). One program the whole
row spilled: its dw and db accumulators (2 x 16K fp32) and the row's x and dy (2 x 16K fp32) fill the register
file of an SM by themselves. Here (`reload`) one program a row range (kernels._rows.reduction_programs, unsplit:
one an SM) keeps only dw and db across a row: x and dy are loaded for the sums and the partials, reduced, then
loaded again (from L1 or L2) for dx, so no row is live across the two reductions. WARPSxSTAGES variants, the row
loop pipelined with STAGES > 1.

Run from the repository root: python3 baselines/h200/s40/explore109.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              python3 baselines/h200/s40/explore109.py --offline   (Triton 3.6, no GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s40/explore109.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _explore import begin, command_line, compile_offline, emit, norm_inputs, timed_rounds  # noqa: E402

from impls.layernorm import reference  # noqa: E402
from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402

VARIANTS = [(16, 1), (16, 2), (32, 1), (32, 2), (8, 1)]  # (warps, stages)
SHAPES = [(1024, 16384), (4096, 16384), (16384, 16384)]


@triton.jit
def _ln_bwd_reload(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy, stride_dx, n_rows,
                   rows_per_program, n_cols: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in tl.range(first, last, num_stages=STAGES):
        row64 = (first * 0 + row).to(tl.int64)
        x_row = X + row64 * stride_x
        dy_row = DY + row64 * stride_dy
        rstd = tl.load(RSTD + row)
        shift = tl.load(MEAN + row) * rstd
        # first read: the partials and the row's sums; nothing of it outlives the sums
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        dy = tl.load(dy_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        xhat = x * rstd - shift
        dw += dy * xhat
        db += dy
        g = dy * tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
        c1 = tl.sum(g, axis=0) / n_cols
        c2 = tl.sum(g * xhat, axis=0) / n_cols
        # second read (another eviction hint, so the compiler cannot merge it with the first): dx
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        xhat = x * rstd - shift
        g = dy * tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
        dx = rstd * (g - c1 - xhat * c2)
        tl.store(DX + row64 * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=ok)
    tl.store(DW_PARTIAL + pid.to(tl.int64) * n_cols + cols, dw, mask=ok)
    tl.store(DB_PARTIAL + pid.to(tl.int64) * n_cols + cols, db, mask=ok)


def reload_bwd(warps: int, stages: int):
    """layernorm_bwd with _ln_bwd_reload in place of the library's row kernel (the library's sum after it)."""
    def bwd(dy, x, w, mean, rstd):
        n_rows, n_cols = x.shape
        dx = torch.empty_like(x)
        programs, rows_per_program = _rows.reduction_programs(n_rows, triton.next_power_of_2(n_cols), x.device)
        partials = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
        _ln_bwd_reload[(programs,)](x, w, dy, mean, rstd, dx, partials[0], partials[1], x.stride(0), dy.stride(0),
                                    dx.stride(0), n_rows, rows_per_program, n_cols,
                                    BLOCK=triton.next_power_of_2(n_cols), STAGES=stages, num_warps=warps)
        dw, db = _rows.sum_partials(partials, w.dtype)
        return dx, dw, db
    return bwd


def offline():
    """Every variant compiled for sm_90a at 16K-wide rows (no GPU): ptxas's registers and spills."""
    print(f"triton {triton.__version__}, sm_90a")
    sig = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "MEAN": "*fp32", "RSTD": "*fp32", "DX": "*bf16",
           "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32",
           "n_rows": "i32", "rows_per_program": "i32"}
    for warps, stages in VARIANTS:
        try:
            kern, ptxas = compile_offline(_ln_bwd_reload, sig, {"n_cols": 16384, "BLOCK": 16384, "STAGES": stages},
                                          ("stride_x", "stride_dy", "stride_dx"), warps)
            info = "; ".join(ptxas) + f" | shared {kern.metadata.shared} B"
        except Exception as e:  # noqa: BLE001 - a variant that does not compile is a result
            info = f"fails: {type(e).__name__} {str(e)[:500]}"
        print(f"reload {warps} warps, {stages} stages: {info}")


def main(shapes, path, smoke):
    out, dev = begin(path, smoke)
    shapes = [(8, 300), (37, 1000)] if smoke else shapes
    variants = VARIANTS[:1] if smoke else VARIANTS
    calls = {}
    for rows, dim in shapes:
        x, dy, w, b = norm_inputs(rows, dim, dev)
        _, mean, rstd = LN.layernorm_fwd(x, w, b)
        xd, wd, bd = (t.double().requires_grad_() for t in (x, w, b))
        reference(xd, wd, bd).backward(dy.double())
        exact = (xd.grad, wd.grad, bd.grad)
        impls = {"lib": LN.layernorm_bwd, **{f"reload-{wa}w{st}s": reload_bwd(wa, st) for wa, st in variants}}
        for name, bwd in impls.items():
            try:
                got = bwd(dy, x, w, mean, rstd)
            except Exception as e:  # noqa: BLE001 - a variant that fails is a result
                emit(out, kind="error", shape=[rows, dim], impl=name, error=f"{type(e).__name__}: {str(e)[:300]}")
                continue
            errs = [float((a.double() - e).norm() / e.norm()) for a, e in zip(got, exact)]
            emit(out, kind="check", shape=[rows, dim], impl=name, rel_err_dx_dw_db=errs, ok=max(errs) < 1e-2)
            calls[(rows, dim, name)] = lambda bwd=bwd, x=x, dy=dy, w=w, mean=mean, rstd=rstd: bwd(dy, x, w, mean,
                                                                                                    rstd)
    if smoke:
        print("smoke: every call ran")
        return
    timed_rounds(out, calls, dev)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main(*command_line(SHAPES))
