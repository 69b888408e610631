"""Session 25: the norm backwards at 4096 x 4096 with fewer rows a program (more programs an SM, more partial
rows to sum). ncu (profile55) read rmsnorm's row kernel there at 12% achieved occupancy: 256 programs of 4 warps,
16 rows each. Session 21 (explore25) measured 8 rows a program 13% slower, with the partial-row sum of then; the
sum has since been retiled and is launched as a dependent. Here 8, 10, 12 and 16 rows a program (512, 410, 342,
256 programs), 4 or 8 warps, STAGES 1 or 3, launched directly, the partial rows summed by kernels._rows.sum_partials
as the library sums them, against the library.

Run from the repository root: python3 baselines/h200/s25/explore58.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s25/explore58.py --smoke   (CPU: checks only)

Checked against float64 (smoke) and against the library (GPU, max difference over max |ref| under 2e-2); timed by
bench.timing (L2 zeroed before each call).
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402


def launch_rms(dy, x, w, rstd, rpp, warps, stages):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    programs = triton.cdiv(n_rows, rpp)
    dx = torch.empty_like(x)
    partials = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)
    RN._rmsnorm_bwd_kernel.fn[(programs,)](x, w, dy, rstd, dx, partials, x.stride(0), dy.stride(0), dx.stride(0),
                                           n_rows, n_cols, rpp, BLOCK=block, SINGLE=single, ROWS=1,
                                           STAGES=stages, num_warps=warps)
    return dx, _rows.sum_partials(partials, w.dtype)[0]


def launch_ln(dy, x, w, mean, rstd, rpp, warps, stages):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    programs = triton.cdiv(n_rows, rpp)
    dx = torch.empty_like(x)
    partials = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
    LN._layernorm_bwd_kernel.fn[(programs,)](x, w, dy, mean, rstd, dx, partials[0], partials[1], x.stride(0),
                                             dy.stride(0), dx.stride(0), n_rows, n_cols, rpp, BLOCK=block,
                                             SINGLE=single, ROWS=1, STAGES=stages, SPLIT=False, num_warps=warps)
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
               [(rpp, w, s) for rpp in (8, 10, 12, 16) for w in (4, 8) for s in (1, 3)])
    shapes = [(37, 300), (7, 4000)] if smoke else [(4096, 4096)]
    bad = 0
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
    for rows, dim in shapes:
        x, dy, w, b = inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        if smoke:
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
            name = f"rpp{rpp} w{warps} s{stages}"
            calls[("rmsnorm", name)] = (lambda rpp=rpp, warps=warps, stages=stages:
                                        launch_rms(dy, x, w, rstd, rpp, warps, stages))
            calls[("layernorm", name)] = (lambda rpp=rpp, warps=warps, stages=stages:
                                          launch_ln(dy, x, w, mean, lrstd, rpp, warps, stages))
        for rnd in range(1 if smoke else 2):
            for (norm, name), fn in calls.items():
                if rnd == 0:
                    err = rel(fn(), rms_ref if norm == "rmsnorm" else ln_ref)
                    bad += err > 2e-2
                    emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if not smoke:
                    us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                    emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
