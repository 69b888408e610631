"""Session 27: when the norm backwards let their partial-row sum be scheduled (the programmatic dependent launch's
trigger), and how many programs they run.

The library launches kernels._rows.sum_partials as a dependent of the backward row kernel (PDL), without a trigger
in the row kernel: the sum's launch is released when the row kernel's last program exits. Session 23 measured a
trigger at the start of the row kernel (slower at 16K-wide rows: waiting programs take the SMs' room). Here the
trigger after a program's row loop, before it stores its partial row (TRIGGER=1: the sum's programs come onto SMs
as the row kernel drains), and at the start (TRIGGER=2, at 4096-wide rows only), against none (TRIGGER=0, the
library's code), with the interleaved walk (e3591b3), at 1 and 2 programs an SM (the library: 2 at 4096-wide rows,
1 at 16K), the autotuner's warps and STAGES ranges. Kernels: the library's SINGLE loops (rmsnorm, layernorm without
SPLIT), copied with the trigger added.

Run from the repository root: python3 baselines/h200/s27/explore66.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s27/explore66.py --smoke   (CPU: checks only)

Smoke: TRIGGER=0 against float64 at odd shapes (the interpreter has no grid dependency control). GPU: every variant
against the library (max difference over max |ref| under 2e-2), then timed by bench.timing (L2 zeroed before each
call), three rounds in alternation.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402


@triton.jit
def rms_bwd(X, W, DY, RSTD, DX, DW_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
            BLOCK: tl.constexpr, STAGES: tl.constexpr, TRIGGER: tl.constexpr):
    pid = tl.program_id(0)
    if TRIGGER == 2:
        gdc_launch_dependents()
    dw_ptr = DW_PARTIAL + pid.to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in tl.range(pid, n_rows, tl.num_programs(0), num_stages=STAGES):
        rstd = tl.load(RSTD + row)
        row64 = tl.cast(row, tl.int64)
        xhat = tl.load(X + row64 * stride_x + cols, mask=col_ok, other=0.0).to(tl.float32) * rstd
        dy = tl.load(DY + row64 * stride_dy + cols, mask=col_ok, other=0.0).to(tl.float32)
        dw += dy * xhat
        g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
        c = tl.sum(g * xhat, axis=0) / n_cols
        dx = rstd * (g - xhat * c)
        tl.store(DX + row64 * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=col_ok)
    if TRIGGER == 1:
        gdc_launch_dependents()
    tl.store(dw_ptr + cols, dw, mask=col_ok)


@triton.jit
def ln_bwd(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols,
           BLOCK: tl.constexpr, STAGES: tl.constexpr, TRIGGER: tl.constexpr):
    pid = tl.program_id(0)
    if TRIGGER == 2:
        gdc_launch_dependents()
    dw_ptr = DW_PARTIAL + pid.to(tl.int64) * n_cols
    db_ptr = DB_PARTIAL + pid.to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in tl.range(pid, n_rows, tl.num_programs(0), num_stages=STAGES):
        row64 = tl.cast(row, tl.int64)
        mean = tl.load(MEAN + row)
        rstd = tl.load(RSTD + row)
        x = tl.load(X + row64 * stride_x + cols, mask=col_ok, other=0.0).to(tl.float32)
        xhat = x * rstd - mean * rstd
        dy = tl.load(DY + row64 * stride_dy + cols, mask=col_ok, other=0.0).to(tl.float32)
        dw += dy * xhat
        db += dy
        g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
        c1 = tl.sum(g, axis=0) / n_cols
        c2 = tl.sum(g * xhat, axis=0) / n_cols
        dx = rstd * (g - c1 - xhat * c2)
        tl.store(DX + row64 * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=col_ok)
    if TRIGGER == 1:
        gdc_launch_dependents()
    tl.store(dw_ptr + cols, dw, mask=col_ok)
    tl.store(db_ptr + cols, db, mask=col_ok)


def launch(norm, dy, x, w, stats, programs, warps, stages, trigger):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    programs = min(programs, n_rows)
    dx = torch.empty_like(x)
    k = 1 if norm == "rmsnorm" else 2
    part = torch.empty(k, programs, n_cols, dtype=torch.float32, device=x.device)
    if norm == "rmsnorm":
        rms_bwd[(programs,)](x, w, dy, stats[0], dx, part, x.stride(0), dy.stride(0), dx.stride(0), n_rows, n_cols,
                             BLOCK=block, STAGES=stages, TRIGGER=trigger, num_warps=warps)
    else:
        ln_bwd[(programs,)](x, w, dy, stats[0], stats[1], dx, part[0], part[1], x.stride(0), dy.stride(0),
                            dx.stride(0), n_rows, n_cols, BLOCK=block, STAGES=stages, TRIGGER=trigger,
                            num_warps=warps)
    return (dx, *_rows.sum_partials(part, w.dtype))


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


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
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        stats = {"rmsnorm": (rstd,), "layernorm": (mean, lrstd)}
        if smoke:
            xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
            refs = {"rmsnorm": torch.autograd.grad(xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr,
                                                   (xr, wr), dy.double()),
                    "layernorm": torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5),
                                                     (xr, wr, br), dy.double())}
            variants = [(2, 4, 3, 0), (1, 4, 1, 0)]
        else:
            refs = {"rmsnorm": RN.rmsnorm_bwd(dy, x, w, rstd), "layernorm": LN.layernorm_bwd(dy, x, w, mean, lrstd)}
            wide = dim >= 16384
            variants = [(k, wp, st, trig) for k in ((1,) if wide else (1, 2)) for wp in ((16, 32) if wide else (4, 8))
                        for st in (1, 3) for trig in ((0, 1) if wide else (0, 1, 2))]
        norms = ("rmsnorm",) if dim >= 16384 else ("rmsnorm", "layernorm")  # layernorm's 16K rows take the split
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd)}
        if "layernorm" in norms:
            calls[("layernorm", "lib")] = lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)
        for k, wp, st, trig in variants:
            for norm in norms:
                calls[(norm, f"{k}/SM w{wp} s{st} t{trig}")] = (
                    lambda norm=norm, k=k, wp=wp, st=st, trig=trig:
                    launch(norm, dy, x, w, stats[norm], k * sms, wp, st, trig))
        for rnd in range(1 if smoke else 3):
            for (norm, name), fn in list(calls.items()):
                if fn is None:
                    continue
                if rnd == 0:
                    try:
                        err = rel(fn(), refs[norm])
                    except Exception as e:  # out of shared memory or registers at some (warps, STAGES)
                        emit(out, kind="error", norm=norm, shape=[rows, dim], variant=name, error=repr(e)[:300])
                        calls[(norm, name)] = None
                        bad += smoke
                        continue
                    bad += err > 2e-2
                    emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer:
                    us = timer(fn) * 1e3
                    emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
