"""Session 26: the norm backwards with x and dy brought in by TMA (tensor descriptors) instead of per-thread loads.

ncu (session 25, profile55) read rmsnorm's backward row kernel at 4096 x 4096 at 12% achieved occupancy with 39%
of its stalls on global loads, and every attempt to put more bytes in flight through more programs, more warps or
deeper cp.async pipelines lost (explore25-58). Here each row is one TMA bulk copy per tensor: the row viewed as
[SUB, 256] (a box of 256 columns, the widest TMA allows, SUB = dim / 256 of them), the row loop pipelined by
Triton (STAGES buffers of x and dy in shared memory, filled asynchronously, no thread issuing per-element loads),
w held in registers for the program, dx stored with TMA (`st1`) or per thread (`st0`). The partial rows of dw
(db) are summed by kernels._rows.sum_partials as the library sums them. Rows whose width is a power of two from
256 up (the descriptors' row view) only: 4096 and 16384 here.

Run from the repository root: python3 baselines/h200/s26/explore60.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s26/explore60.py --smoke   (CPU: checks only)

Smoke: every variant against float64. GPU: every variant against the library (max difference over max |ref|
under 2e-2), then timed by bench.timing (L2 zeroed before each call), two rounds in alternation.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

BOX = 256  # columns a TMA box holds at most


@triton.jit
def rms_bwd_tma(XD, DYD, DXD, DX, W, RSTD, PART, n_rows, n_cols: tl.constexpr, rows_per_program,
                SUB: tl.constexpr, BOX: tl.constexpr, STAGES: tl.constexpr, TMA_STORE: tl.constexpr):
    pid = tl.program_id(0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    offs = tl.arange(0, SUB)[:, None] * BOX + tl.arange(0, BOX)[None, :]  # [SUB, BOX]: the row's columns
    w = tl.load(W + offs).to(tl.float32)
    dw = tl.zeros([SUB, BOX], dtype=tl.float32)
    for row in tl.range(first, last, num_stages=STAGES):
        rstd = tl.load(RSTD + row)
        xhat = XD.load([row * SUB, 0]).to(tl.float32) * rstd
        dy = DYD.load([row * SUB, 0]).to(tl.float32)
        dw += dy * xhat
        g = dy * w
        c = tl.sum(tl.sum(g * xhat, axis=1), axis=0) / n_cols
        dx = (rstd * (g - xhat * c)).to(DX.dtype.element_ty)
        if TMA_STORE:
            DXD.store([row * SUB, 0], dx)
        else:
            tl.store(DX + (first * 0 + row).to(tl.int64) * n_cols + offs, dx)  # a tensor when interpreted
    tl.store(PART + pid.to(tl.int64) * n_cols + offs, dw)


@triton.jit
def ln_bwd_tma(XD, DYD, DXD, DX, W, MEAN, RSTD, DWP, DBP, n_rows, n_cols: tl.constexpr, rows_per_program,
               SUB: tl.constexpr, BOX: tl.constexpr, STAGES: tl.constexpr, TMA_STORE: tl.constexpr):
    pid = tl.program_id(0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    offs = tl.arange(0, SUB)[:, None] * BOX + tl.arange(0, BOX)[None, :]
    w = tl.load(W + offs).to(tl.float32)
    dw = tl.zeros([SUB, BOX], dtype=tl.float32)
    db = tl.zeros([SUB, BOX], dtype=tl.float32)
    for row in tl.range(first, last, num_stages=STAGES):
        rstd = tl.load(RSTD + row)
        shift = tl.load(MEAN + row) * rstd
        xhat = XD.load([row * SUB, 0]).to(tl.float32) * rstd - shift
        dy = DYD.load([row * SUB, 0]).to(tl.float32)
        dw += dy * xhat
        db += dy
        g = dy * w
        c1 = tl.sum(tl.sum(g, axis=1), axis=0) / n_cols
        c2 = tl.sum(tl.sum(g * xhat, axis=1), axis=0) / n_cols
        dx = (rstd * (g - c1 - xhat * c2)).to(DX.dtype.element_ty)
        if TMA_STORE:
            DXD.store([row * SUB, 0], dx)
        else:
            tl.store(DX + (first * 0 + row).to(tl.int64) * n_cols + offs, dx)  # a tensor when interpreted
    tl.store(DWP + pid.to(tl.int64) * n_cols + offs, dw)
    tl.store(DBP + pid.to(tl.int64) * n_cols + offs, db)


def descriptors(sub, *tensors):
    """Each [rows, dim] tensor as [rows * sub, 256], a row one [sub, 256] box."""
    return [TensorDescriptor.from_tensor(t.view(-1, BOX), [sub, BOX]) for t in tensors]


def plan(x):
    n_rows, n_cols = x.shape
    block, _ = _rows.row_block(n_cols)
    programs, rpp = _rows.reduction_programs(n_rows, block, x.device)
    return n_rows, n_cols, n_cols // BOX, programs, rpp


def rms_tma(dy, x, w, rstd, warps, stages, tma_store):
    n_rows, n_cols, sub, programs, rpp = plan(x)
    dx = torch.empty_like(x)
    part = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)
    xd, dyd, dxd = descriptors(sub, x, dy, dx)
    rms_bwd_tma[(programs,)](xd, dyd, dxd, dx, w, rstd, part, n_rows, n_cols, rpp, SUB=sub, BOX=BOX, STAGES=stages,
                             TMA_STORE=tma_store, num_warps=warps)
    return dx, _rows.sum_partials(part, w.dtype)[0]


def ln_tma(dy, x, w, mean, rstd, warps, stages, tma_store):
    n_rows, n_cols, sub, programs, rpp = plan(x)
    dx = torch.empty_like(x)
    part = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
    xd, dyd, dxd = descriptors(sub, x, dy, dx)
    ln_bwd_tma[(programs,)](xd, dyd, dxd, dx, w, mean, rstd, part[0], part[1], n_rows, n_cols, rpp, SUB=sub,
                            BOX=BOX, STAGES=stages, TMA_STORE=tma_store, num_warps=warps)
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
    shapes = [(37, 512), (5, 4096)] if smoke else [(4096, 4096), (1024, 16384), (16384, 4096)]
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
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
            variants = [(4, 2, 0), (4, 3, 1)]
        else:
            rms_ref = RN.rmsnorm_bwd(dy, x, w, rstd)
            ln_ref = LN.layernorm_bwd(dy, x, w, mean, lrstd)
            variants = ([(wp, st, ts) for wp in (4, 8) for st in (2, 3, 4) for ts in (0, 1)] if dim == 4096 else
                        [(wp, st, ts) for wp in (8, 16) for st in (2, 3) for ts in (0, 1)])
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        for wp, st, ts in variants:
            name = f"w{wp} s{st} st{ts}"
            calls[("rmsnorm", name)] = lambda wp=wp, st=st, ts=ts: rms_tma(dy, x, w, rstd, wp, st, ts)
            calls[("layernorm", name)] = lambda wp=wp, st=st, ts=ts: ln_tma(dy, x, w, mean, lrstd, wp, st, ts)
        failed = set()
        for rnd in range(1 if smoke else 2):
            for (norm, name), fn in calls.items():
                if (norm, name) in failed:
                    continue
                if rnd == 0:
                    try:
                        err = rel(fn(), rms_ref if norm == "rmsnorm" else ln_ref)
                    except Exception as e:  # out of shared memory, say
                        emit(out, kind="error", norm=norm, shape=[rows, dim], variant=name, error=repr(e)[:300])
                        failed.add((norm, name))
                        bad += smoke
                        continue
                    bad += err > 2e-2
                    emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer:
                    us = timer(fn) * 1e3
                    emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    if not smoke:
        d = torch.cuda.current_device()
        for kname, k in (("rms_bwd_tma", rms_bwd_tma), ("ln_bwd_tma", ln_bwd_tma)):
            for key, ck in k.device_caches[d][0].items():
                emit(out, kind="regs", kernel=kname, n_regs=ck.n_regs, n_spills=ck.n_spills,
                     shared=ck.metadata.shared, warps=ck.metadata.num_warps, key=str(key)[-200:])
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
