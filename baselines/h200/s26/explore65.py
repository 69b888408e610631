"""Session 26 (prepared, not run: the session's device time was spent): the norm backwards' program count with
the interleaved row walk (e3591b3).

kernels._rows.reduction_programs sets the programs for the norm backwards (two an SM at 4096-wide rows, one at
16K, at least 16 rows each), measured with each program walking a contiguous range. With the walk interleaved
(programs p, p + P, ... sweep the tensors together) the best count may differ: here the library's kernels
launched directly at 1-4 programs an SM (more partial rows to sum: kernels._rows.sum_partials sums them as the
library does), 4 or 8 warps (16 or 32 at 16K-wide rows), STAGES 1 or 3, at the points where 70% is missed
(rmsnorm 4096 x 4096 34.3 us and 1024 x 16384 35.1 at e3591b3; 70% is 33.6) and at 16384 x 4096 as a check.

Run from the repository root: python3 baselines/h200/s26/explore65.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s26/explore65.py --smoke   (CPU: checks only)

Smoke: every variant against float64 at odd shapes. GPU: against the library (max difference over max |ref|
under 2e-2), then timed by bench.timing (L2 zeroed before each call), two rounds in alternation.
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


def launch_rms(dy, x, w, rstd, programs, warps, stages):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    rpp = triton.cdiv(n_rows, programs)
    dx = torch.empty_like(x)
    part = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)
    RN._rmsnorm_bwd_kernel.fn[(programs,)](x, w, dy, rstd, dx, part, x.stride(0), dy.stride(0), dx.stride(0),
                                           n_rows, n_cols, rpp, BLOCK=block, SINGLE=single, ROWS=1, STAGES=stages,
                                           num_warps=warps)
    return dx, _rows.sum_partials(part, w.dtype)[0]


def launch_ln(dy, x, w, mean, rstd, programs, warps, stages):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    rpp = triton.cdiv(n_rows, programs)
    dx = torch.empty_like(x)
    part = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
    LN._layernorm_bwd_kernel.fn[(programs,)](x, w, dy, mean, rstd, dx, part[0], part[1], x.stride(0), dy.stride(0),
                                             dx.stride(0), n_rows, n_cols, rpp, BLOCK=block, SINGLE=single, ROWS=1,
                                             STAGES=stages, SPLIT=False, num_warps=warps)
    dw, db = _rows.sum_partials(part, w.dtype)
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
    sms = _rows.sm_count(torch.device(dev))
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name(),
             sms=sms)
    shapes = [(37, 300), (7, 4000)] if smoke else [(4096, 4096), (1024, 16384), (16384, 4096)]
    bad = 0
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
            variants = [(2, 4, 3), (3, 4, 1)]
        else:
            rms_ref = RN.rmsnorm_bwd(dy, x, w, rstd)
            ln_ref = LN.layernorm_bwd(dy, x, w, mean, lrstd)
            warps = (16, 32) if dim >= 16384 else (4, 8)
            per_sm = (1, 2) if dim >= 16384 else (1, 2, 3, 4)
            variants = [(k, wp, st) for k in per_sm for wp in warps for st in (1, 3)]
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd)}
        if dim < 16384:  # layernorm's 16K-wide rows take the split, whose programs are laid out apart
            calls[("layernorm", "lib")] = lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)
        for k, wp, st in variants:
            programs = min(rows, k * sms)
            name = f"{k}/SM w{wp} s{st}"
            calls[("rmsnorm", name)] = (lambda programs=programs, wp=wp, st=st:
                                        launch_rms(dy, x, w, rstd, programs, wp, st))
            if dim < 16384:
                calls[("layernorm", name)] = (lambda programs=programs, wp=wp, st=st:
                                              launch_ln(dy, x, w, mean, lrstd, programs, wp, st))
        for rnd in range(1 if smoke else 2):
            for (norm, name), fn in calls.items():
                if rnd == 0:
                    try:
                        err = rel(fn(), rms_ref if norm == "rmsnorm" else ln_ref)
                    except Exception as e:  # out of shared memory or registers at some (warps, STAGES)
                        emit(out, kind="error", norm=norm, shape=[rows, dim], variant=name, error=repr(e)[:300])
                        calls[(norm, name)] = None
                        bad += smoke
                        continue
                    bad += err > 2e-2
                    emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer and calls[(norm, name)] is not None:
                    us = timer(fn) * 1e3
                    emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
