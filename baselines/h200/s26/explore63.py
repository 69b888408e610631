"""Session 26: the norm backwards with each program's rows interleaved across the tensor instead of contiguous.

The library gives program p rows [p * R, p * R + R) (R rows a program), so at any moment its 128-264 programs
read and write as many separate regions of x, dy and dx, each walked in order. Here (`inter`) program p takes
rows p, p + P, p + 2P, ... (P programs), as the pipelined forwards walk their tiles: the programs together sweep
the tensors front to back, a band of P rows at a time, as an elementwise kernel does. The same programs, the
same partial rows (each program's own sum, in the same order each call), the same configs as the library's
autotuner took; the kernels are the library's loops with only the row walk changed (rmsnorm's one-program
loop, layernorm's one-program loop and its split halves).

Run from the repository root: python3 baselines/h200/s26/explore63.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s26/explore63.py --smoke   (CPU: checks only)

Smoke: every variant against float64 at odd shapes. GPU: against the library (max difference over max |ref|
under 2e-2), then timed by bench.timing (L2 zeroed before each call), three rounds in alternation.
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
def rms_bwd(X, W, DY, RSTD, DX, DW_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
            rows_per_program, BLOCK: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr, INTER: tl.constexpr):
    """The library's one-program loop (rows that fit a block); INTER: tiles pid, pid + P, ... of ROWS rows."""
    pid = tl.program_id(0)
    dw_ptr = DW_PARTIAL + pid.to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    if INTER:
        lo, hi, step, end = pid, tl.cdiv(n_rows, ROWS), tl.num_programs(0), n_rows
    else:
        lo = pid * rows_per_program
        end = tl.minimum(lo + rows_per_program, n_rows)
        hi, step = end, ROWS
    for t in tl.range(lo, hi, step, num_stages=STAGES):
        rows = (t * ROWS if INTER else t) + tl.arange(0, ROWS)
        row_ok = rows < end
        mask = row_ok[:, None] & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
        xhat = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32) * rstd[:, None]
        dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dw += dy * xhat
        g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        c = tl.sum(g * xhat, axis=1) / n_cols
        dx = rstd[:, None] * (g - xhat * c[:, None])
        tl.store(DX + rows64 * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0), mask=col_ok)


@triton.jit
def ln_bwd(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols,
           rows_per_program, BLOCK: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr, SPLIT: tl.constexpr,
           INTER: tl.constexpr):
    """The library's one-program loop and (SPLIT) its halves; INTER: rows (tiles) pid, pid + P, ..."""
    pid = tl.program_id(0) // 2 if SPLIT else tl.program_id(0)
    n_prog = tl.num_programs(0) // 2 if SPLIT else tl.num_programs(0)
    dw_ptr = DW_PARTIAL + pid.to(tl.int64) * n_cols
    db_ptr = DB_PARTIAL + pid.to(tl.int64) * n_cols
    if INTER:
        lo, hi, step, end = pid, tl.cdiv(n_rows, ROWS), n_prog, n_rows
    else:
        lo = pid * rows_per_program
        end = tl.minimum(lo + rows_per_program, n_rows)
        hi, step = end, ROWS
    if SPLIT:
        half = tl.program_id(0) % 2
        HALF: tl.constexpr = BLOCK // 2
        own = half * HALF + tl.arange(0, HALF)
        other = (1 - half) * HALF + tl.arange(0, HALF)
        own_ok = own < n_cols
        other_ok = other < n_cols
        dw = tl.zeros([HALF], dtype=tl.float32)
        db = tl.zeros([HALF], dtype=tl.float32)
        for row in tl.range(lo, hi, step if INTER else 1, num_stages=STAGES):
            row64 = (lo * 0 + row).to(tl.int64)
            x_row = X + row64 * stride_x
            dy_row = DY + row64 * stride_dy
            rstd = tl.load(RSTD + row)
            shift = tl.load(MEAN + row) * rstd
            xo = tl.load(x_row + other, mask=other_ok, other=0.0).to(tl.float32) * rstd - shift
            go = (tl.load(dy_row + other, mask=other_ok, other=0.0).to(tl.float32)
                  * tl.load(W + other, mask=other_ok, other=0.0).to(tl.float32))
            a1 = tl.zeros([HALF], dtype=tl.float32)
            a2 = tl.zeros([HALF], dtype=tl.float32)
            a1 += go
            a2 += go * xo
            xhat = tl.load(x_row + own, mask=own_ok, other=0.0).to(tl.float32) * rstd - shift
            dy = tl.load(dy_row + own, mask=own_ok, other=0.0).to(tl.float32)
            g = dy * tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32)
            dw += dy * xhat
            db += dy
            c1 = tl.sum(a1 + g, axis=0)
            c2 = tl.sum(a2 + g * xhat, axis=0)
            dx = rstd * (g - c1 / n_cols - xhat * (c2 / n_cols))
            tl.store(DX + row64 * stride_dx + own, dx.to(DX.dtype.element_ty), mask=own_ok)
        tl.store(dw_ptr + own, dw, mask=own_ok)
        tl.store(db_ptr + own, db, mask=own_ok)
    else:
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n_cols
        dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        db = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for t in tl.range(lo, hi, step, num_stages=STAGES):
            rows = (t * ROWS if INTER else t) + tl.arange(0, ROWS)
            row_ok = rows < end
            mask = row_ok[:, None] & col_ok[None, :]
            rows64 = rows.to(tl.int64)[:, None]
            mean = tl.load(MEAN + rows, mask=row_ok, other=0.0)
            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
            shift = mean * rstd
            x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            xhat = x * rstd[:, None] - shift[:, None]
            dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dw += dy * xhat
            db += dy
            g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
            c1 = tl.sum(g, axis=1) / n_cols
            c2 = tl.sum(g * xhat, axis=1) / n_cols
            dx = rstd[:, None] * (g - c1[:, None] - xhat * c2[:, None])
            tl.store(DX + rows64 * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        tl.store(dw_ptr + cols, tl.sum(dw, axis=0), mask=col_ok)
        tl.store(db_ptr + cols, tl.sum(db, axis=0), mask=col_ok)


def rms_call(dy, x, w, rstd, cfg, inter):
    n_rows, n_cols = x.shape
    block, _ = _rows.row_block(n_cols)
    programs, rpp = _rows.reduction_programs(n_rows, block, x.device)
    dx = torch.empty_like(x)
    part = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)
    rows, warps, stages = cfg
    rms_bwd[(programs,)](x, w, dy, rstd, dx, part, x.stride(0), dy.stride(0), dx.stride(0), n_rows, n_cols, rpp,
                         BLOCK=block, ROWS=rows, STAGES=stages, INTER=inter, num_warps=warps)
    return dx, _rows.sum_partials(part, w.dtype)[0]


def ln_call(dy, x, w, mean, rstd, cfg, inter):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    split = _rows.split_columns(block, single)
    programs, rpp = _rows.reduction_programs(n_rows, block, x.device, split)
    dx = torch.empty_like(x)
    part = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
    rows, warps, stages = cfg
    ln_bwd[(programs * (2 if split else 1),)](x, w, dy, mean, rstd, dx, part[0], part[1], x.stride(0), dy.stride(0),
                                             dx.stride(0), n_rows, n_cols, rpp, BLOCK=block, ROWS=rows,
                                             STAGES=stages, SPLIT=split, INTER=inter, num_warps=warps)
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


def chosen(autotuner):
    c = autotuner.best_config
    return c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"]


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())
    shapes = ([(37, 300), (7, 4000), (5, 16000), (131, 768)] if smoke else
              [(4096, 4096), (1024, 16384), (16384, 4096), (4096, 16384), (16384, 768), (65536, 4096)])
    bad = 0
    for n_rows, dim in shapes:
        x, dy, w, b = inputs(n_rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        if smoke:
            xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
            rms_ref = torch.autograd.grad(xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr, (xr, wr),
                                          dy.double())
            ln_ref = torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5), (xr, wr, br),
                                         dy.double())
            rcfg = lcfg = (2 if dim <= 1024 else 1, 4, 3)
        else:
            rms_ref = RN.rmsnorm_bwd(dy, x, w, rstd)
            rcfg = chosen(RN._rmsnorm_bwd_kernel)
            ln_ref = LN.layernorm_bwd(dy, x, w, mean, lrstd)
            lcfg = chosen(LN._layernorm_bwd_kernel)
        emit(out, kind="config", shape=[n_rows, dim], rmsnorm=rcfg, layernorm=lcfg)
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd),
                 ("rmsnorm", "contig"): lambda: rms_call(dy, x, w, rstd, rcfg, False),
                 ("layernorm", "contig"): lambda: ln_call(dy, x, w, mean, lrstd, lcfg, False),
                 ("rmsnorm", "inter"): lambda: rms_call(dy, x, w, rstd, rcfg, True),
                 ("layernorm", "inter"): lambda: ln_call(dy, x, w, mean, lrstd, lcfg, True)}
        for rnd in range(1 if smoke else 3):
            for (norm, name), fn in calls.items():
                if rnd == 0:
                    err = rel(fn(), rms_ref if norm == "rmsnorm" else ln_ref)
                    bad += err > 2e-2
                    emit(out, kind="check", norm=norm, shape=[n_rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer:
                    us = timer(fn) * 1e3
                    emit(out, kind="time", norm=norm, shape=[n_rows, dim], variant=name, round=rnd, us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
