"""Session 25: the split backward (two programs a row range, each owning half the columns and reading the other
half for the row's sums, kernels/layernorm.py _layernorm_bwd_half) at 4096-wide rows, where the library walks
whole rows one program a range. ncu (profile55) read rmsnorm's 4096 x 4096 backward at 12% achieved occupancy:
256 programs of 4 warps, two an SM. Split, the same 256 row ranges give 512 programs, four an SM, each with half
the accumulators. For rmsnorm the half kernel is written here (`_rms_bwd_half`; the library has none); for
layernorm the library's kernel is launched with SPLIT at BLOCK 4096. Rows per range 16 (as the library) or 32,
warps 2/4/8, STAGES 1/3, each launched directly (no autotuner), the partial rows summed by kernels._rows.

Run from the repository root: python3 baselines/h200/s25/explore56.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s25/explore56.py --smoke   (CPU: checks only)

Checked: every variant's dx, dw (db) against float64 at odd shapes (the smoke run) and against the library at the
timed shapes (max difference over max |ref| under 2e-2); timed by bench.timing (L2 zeroed before each call).
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402


@triton.jit
def _rms_bwd_half(X, W, DY, RSTD, DX, DW_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols, rows_per_program,
                  HALF: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0) // 2
    half = tl.program_id(0) % 2
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    own = half * HALF + tl.arange(0, HALF)
    other = (1 - half) * HALF + tl.arange(0, HALF)
    own_ok = own < n_cols
    other_ok = other < n_cols
    dw = tl.zeros([HALF], dtype=tl.float32)
    for row in tl.range(first, last, num_stages=STAGES):
        row64 = (first * 0 + row).to(tl.int64)
        x_row = X + row64 * stride_x
        dy_row = DY + row64 * stride_dy
        rstd = tl.load(RSTD + row)
        a = (tl.load(dy_row + other, mask=other_ok, other=0.0).to(tl.float32)
             * tl.load(W + other, mask=other_ok, other=0.0).to(tl.float32)
             * tl.load(x_row + other, mask=other_ok, other=0.0).to(tl.float32))
        x = tl.load(x_row + own, mask=own_ok, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + own, mask=own_ok, other=0.0).to(tl.float32)
        xhat = x * rstd
        dw += dy * xhat
        g = dy * tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32)
        c = tl.sum(a + g * x, axis=0) * rstd / n_cols  # sum(g * xhat) over the whole row
        dx = rstd * (g - xhat * c)
        tl.store(DX + row64 * stride_dx + own, dx.to(DX.dtype.element_ty), mask=own_ok)
    tl.store(DW_PARTIAL + pid.to(tl.int64) * n_cols + own, dw, mask=own_ok)


def rms_split(dy, x, w, rstd, rpp, warps, stages):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    ranges = triton.cdiv(n_rows, rpp)
    dx = torch.empty_like(x)
    partials = torch.empty(1, ranges, n_cols, dtype=torch.float32, device=x.device)
    _rms_bwd_half[(2 * ranges,)](x, w, dy, rstd, dx, partials, x.stride(0), dy.stride(0), dx.stride(0), n_rows,
                                 n_cols, rpp, HALF=block // 2, STAGES=stages, num_warps=warps)
    return dx, _rows.sum_partials(partials, w.dtype)[0]


def ln_split(dy, x, w, mean, rstd, rpp, warps, stages):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    ranges = triton.cdiv(n_rows, rpp)
    dx = torch.empty_like(x)
    partials = torch.empty(2, ranges, n_cols, dtype=torch.float32, device=x.device)
    LN._layernorm_bwd_kernel.fn[(2 * ranges,)](x, w, dy, mean, rstd, dx, partials[0], partials[1], x.stride(0),
                                               dy.stride(0), dx.stride(0), n_rows, n_cols, rpp, BLOCK=block,
                                               SINGLE=True, ROWS=1, STAGES=stages, SPLIT=True, num_warps=warps)
    dw, db = _rows.sum_partials(partials, w.dtype)
    return dx, dw, db


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def inputs(rows, dim, dev):
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
    dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    return x, dy, w, b


def rel(got, ref):
    return max(float((a.double() - r.double()).abs().max() / r.double().abs().max()) for a, r in zip(got, ref))


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    configs = ([(3, 4, 3), (2, 4, 1)] if smoke else
               [(rpp, w, s) for rpp in (16, 32) for w in (2, 4, 8) for s in (1, 3)])
    shapes = [(37, 300), (7, 4000)] if smoke else [(4096, 4096), (1024, 4096), (16384, 4096)]
    bad = 0
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
    for rows, dim in shapes:
        x, dy, w, b = inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        if smoke:  # float64 references
            xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
            rms_ref = torch.autograd.grad(xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr, (xr, wr),
                                          dy.double())
            ln_ref = torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5), (xr, wr, br),
                                         dy.double())
        else:
            rms_ref = RN.rmsnorm_bwd(dy, x, w, rstd)
            ln_ref = LN.layernorm_bwd(dy, x, w, mean, lrstd)
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        for rpp, warps, stages in configs:
            name = f"split rpp{rpp} w{warps} s{stages}"
            calls[("rmsnorm", name)] = (lambda rpp=rpp, warps=warps, stages=stages:
                                        rms_split(dy, x, w, rstd, rpp, warps, stages))
            calls[("layernorm", name)] = (lambda rpp=rpp, warps=warps, stages=stages:
                                          ln_split(dy, x, w, mean, lrstd, rpp, warps, stages))
        for (norm, name), fn in calls.items():
            err = rel(fn(), rms_ref if norm == "rmsnorm" else ln_ref)
            bad += err > 2e-2
            emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
            if not smoke:
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, us=round(us, 2))
        if not smoke:  # the library again, last: drift over the run
            for norm in ("rmsnorm", "layernorm"):
                us = BT.time_cuda(calls[(norm, "lib")], cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", norm=norm, shape=[rows, dim], variant="lib again", us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
