"""Session 26: two ideas against issue 8's remaining misses.

A. layernorm forward at 768-wide rows, where the library and torch.compile run the same algorithm (one tile of
   rows a program) and tie (17.25 us at 16384 x 768, 52.83 at 65536 x 768): a persistent kernel, PER_SM programs
   an SM, each walking its tiles with the next tile's x loaded into registers (PREFETCH 1 or 2 tiles ahead)
   while this one is reduced and stored, w and b loaded once a program. Against the library, compile and a copy.

B. the norm backwards at 4096 x 4096 and 1024 x 16384 (70% there needs 33.6 us): the partial rows of dw (db)
   summed inside the backward kernel after a grid barrier (a cooperative launch, so every program is resident;
   each program then sums a slice of columns over all partial rows, read from L2) instead of by a second kernel:
   one launch, the same fixed summation order each call. The library's own backward body is called as is; the
   script adds the barrier and the column sums (`coop`); `2launch` runs the same column sums as a second plain
   launch (the control).

Run from the repository root: python3 baselines/h200/s26/explore59.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s26/explore59.py --smoke   (CPU: checks only)

Smoke: every variant the interpreter can run (A's kernels, B's two-launch form) against float64 at odd shapes.
GPU: every variant against the library (max difference over max |ref| under 2e-2), then timed by bench.timing
(L2 zeroed before each call), three rounds in alternation.
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

_rms_body = RN._rmsnorm_bwd_kernel.fn
_ln_body = LN._layernorm_bwd_kernel.fn


# ---------------------------------------------------------------- A: layernorm forward, persistent with prefetch
@triton.jit
def _ln_tile_out(x, rows, Y, w, b, n_rows, n_cols: tl.constexpr, eps, cols, col_ok):
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    xf = x.to(tl.float32)
    mean = tl.sum(xf, axis=1) / n_cols
    xc = tl.where(mask, xf - mean[:, None], 0.0)
    rstd = tl.math.rsqrt(tl.sum(xc * xc, axis=1) / n_cols + eps)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(Y + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _ln_tile_in(X, t, n_rows, n_cols: tl.constexpr, cols, col_ok, ROWS: tl.constexpr):
    rows = t * ROWS + tl.arange(0, ROWS)
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    return tl.load(X + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)


@triton.jit
def ln_fwd_persist(X, W, B, Y, n_rows, n_cols: tl.constexpr, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr,
                   PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=col_ok, other=0.0).to(tl.float32)
    n_tiles = tl.cdiv(n_rows, ROWS)
    if PREFETCH == 0:
        for t in tl.range(pid, n_tiles, nprog, num_stages=1):
            x = _ln_tile_in(X, t, n_rows, n_cols, cols, col_ok, ROWS)
            _ln_tile_out(x, t * ROWS + tl.arange(0, ROWS), Y, w, b, n_rows, n_cols, eps, cols, col_ok)
    elif PREFETCH == 1:
        x = _ln_tile_in(X, pid, n_rows, n_cols, cols, col_ok, ROWS)
        for t in tl.range(pid, n_tiles, nprog, num_stages=1):
            xn = _ln_tile_in(X, t + nprog, n_rows, n_cols, cols, col_ok, ROWS)
            _ln_tile_out(x, t * ROWS + tl.arange(0, ROWS), Y, w, b, n_rows, n_cols, eps, cols, col_ok)
            x = xn
    else:
        x = _ln_tile_in(X, pid, n_rows, n_cols, cols, col_ok, ROWS)
        x1 = _ln_tile_in(X, pid + nprog, n_rows, n_cols, cols, col_ok, ROWS)
        for t in tl.range(pid, n_tiles, nprog, num_stages=1):
            x2 = _ln_tile_in(X, t + 2 * nprog, n_rows, n_cols, cols, col_ok, ROWS)
            _ln_tile_out(x, t * ROWS + tl.arange(0, ROWS), Y, w, b, n_rows, n_cols, eps, cols, col_ok)
            x = x1
            x1 = x2


def ln_persist(x, w, b, rows, warps, per_sm, prefetch):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    grid = (max(1, min(triton.cdiv(n_rows, rows), per_sm * _rows.sm_count(x.device))),)
    ln_fwd_persist[grid](x, w, b, y, n_rows, n_cols, 1e-5, BLOCK=triton.next_power_of_2(n_cols), ROWS=rows,
                         PREFETCH=prefetch, num_warps=warps)
    return y


# ---------------------------------------------------------------- B: backward with the dw (db) sum in the kernel
@triton.jit
def _column_sums(PART, OUT, n_parts, n_cols, SLICE: tl.constexpr, BP: tl.constexpr):
    """OUT[cols] = sum over the n_parts partial rows of PART[:, cols], this program's SLICE columns; the partial
    rows read past L1 (other programs wrote them)."""
    cols = tl.program_id(0) * SLICE + tl.arange(0, SLICE)
    acc = tl.zeros([BP, SLICE], dtype=tl.float32)
    for p0 in range(0, n_parts, BP):
        parts = p0 + tl.arange(0, BP)
        mask = (parts < n_parts)[:, None] & (cols < n_cols)[None, :]
        acc += tl.load(PART + parts.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0,
                       cache_modifier=".cg")
    tl.store(OUT + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=cols < n_cols)


@triton.jit
def _arrive_and_wait(SYNC, n_programs):
    """Grid barrier: every program's partial rows are written and visible before any program reads them."""
    tl.debug_barrier()
    tl.atomic_add(SYNC, 1, sem="release", scope="gpu")
    while tl.load(SYNC, volatile=True) < n_programs:
        pass
    tl.atomic_add(SYNC, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _depart(SYNC, n_programs):
    """The last program out zeroes both counters for the next call."""
    tl.debug_barrier()
    if tl.atomic_add(SYNC + 1, 1, sem="acq_rel", scope="gpu") == n_programs - 1:
        tl.atomic_xchg(SYNC, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(SYNC + 1, 0, sem="relaxed", scope="gpu")


@triton.jit
def rms_bwd_coop(X, W, DY, RSTD, DX, PART, DW, SYNC, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
                 rows_per_program, n_parts, BLOCK: tl.constexpr, SINGLE: tl.constexpr, STAGES: tl.constexpr,
                 PHASE: tl.constexpr, SLICE: tl.constexpr, BP: tl.constexpr):
    """PHASE 0: the library's body (partial rows); 1: the column sums; 2: both, a grid barrier between."""
    if PHASE != 1:
        _rms_body(X, W, DY, RSTD, DX, PART, stride_x, stride_dy, stride_dx, n_rows, n_cols, rows_per_program,
                  BLOCK, SINGLE, 1, STAGES)
    if PHASE == 2:
        _arrive_and_wait(SYNC, tl.num_programs(0))
    if PHASE != 0:
        _column_sums(PART, DW, n_parts, n_cols, SLICE, BP)
    if PHASE == 2:
        _depart(SYNC, tl.num_programs(0))


@triton.jit
def ln_bwd_coop(X, W, DY, MEAN, RSTD, DX, DWP, DBP, DW, DB, SYNC, stride_x, stride_dy, stride_dx, n_rows, n_cols,
                rows_per_program, n_parts, BLOCK: tl.constexpr, SINGLE: tl.constexpr, STAGES: tl.constexpr,
                SPLIT: tl.constexpr, PHASE: tl.constexpr, SLICE: tl.constexpr, BP: tl.constexpr):
    if PHASE != 1:
        _ln_body(X, W, DY, MEAN, RSTD, DX, DWP, DBP, stride_x, stride_dy, stride_dx, n_rows, n_cols,
                 rows_per_program, BLOCK, SINGLE, 1, STAGES, SPLIT)
    if PHASE == 2:
        _arrive_and_wait(SYNC, tl.num_programs(0))
    if PHASE != 0:
        _column_sums(DWP, DW, n_parts, n_cols, SLICE, BP)
        _column_sums(DBP, DB, n_parts, n_cols, SLICE, BP)
    if PHASE == 2:
        _depart(SYNC, tl.num_programs(0))


_SYNC = {}


def sync_buffer(device):
    if device not in _SYNC:
        _SYNC[device] = torch.zeros(2, dtype=torch.int32, device=device)
    return _SYNC[device]


def slices(n_cols, grid):
    """(SLICE, BP, programs used by the column sums) for `grid` programs summing n_parts rows."""
    sl = triton.next_power_of_2(triton.cdiv(n_cols, grid))
    return sl, max(16, min(256, 4096 // sl)), triton.cdiv(n_cols, sl)


def rms_coop(dy, x, w, rstd, cfg, coop):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    programs, rpp = _rows.reduction_programs(n_rows, block, x.device)
    dx = torch.empty_like(x)
    part = torch.empty(programs, n_cols, dtype=torch.float32, device=x.device)
    dw = torch.empty(n_cols, dtype=w.dtype, device=x.device)
    warps, stages = cfg
    sl, bp, _ = slices(n_cols, programs)
    args = (x, w, dy, rstd, dx, part, dw, sync_buffer(x.device), x.stride(0), dy.stride(0), dx.stride(0), n_rows,
            n_cols, rpp, programs)
    if coop:
        rms_bwd_coop[(programs,)](*args, BLOCK=block, SINGLE=single, STAGES=stages, PHASE=2, SLICE=sl, BP=bp,
                                  num_warps=warps, launch_cooperative_grid=True)
    else:
        rms_bwd_coop[(programs,)](*args, BLOCK=block, SINGLE=single, STAGES=stages, PHASE=0, SLICE=sl, BP=bp,
                                  num_warps=warps)
        rms_bwd_coop[(triton.cdiv(n_cols, sl),)](*args, BLOCK=block, SINGLE=single, STAGES=stages, PHASE=1,
                                                 SLICE=sl, BP=bp, num_warps=4)
    return dx, dw


def ln_coop(dy, x, w, mean, rstd, cfg, coop):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    split = _rows.split_columns(block, single)
    programs, rpp = _rows.reduction_programs(n_rows, block, x.device, split)
    grid = programs * (2 if split else 1)
    dx = torch.empty_like(x)
    part = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
    dw = torch.empty(n_cols, dtype=w.dtype, device=x.device)
    db = torch.empty(n_cols, dtype=w.dtype, device=x.device)
    warps, stages = cfg
    sl, bp, _ = slices(n_cols, grid)
    args = (x, w, dy, mean, rstd, dx, part[0], part[1], dw, db, sync_buffer(x.device), x.stride(0), dy.stride(0),
            dx.stride(0), n_rows, n_cols, rpp, programs)
    if coop:
        ln_bwd_coop[(grid,)](*args, BLOCK=block, SINGLE=single, STAGES=stages, SPLIT=split, PHASE=2, SLICE=sl,
                             BP=bp, num_warps=warps, launch_cooperative_grid=True)
    else:
        ln_bwd_coop[(grid,)](*args, BLOCK=block, SINGLE=single, STAGES=stages, SPLIT=split, PHASE=0, SLICE=sl,
                             BP=bp, num_warps=warps)
        ln_bwd_coop[(triton.cdiv(n_cols, sl),)](*args, BLOCK=block, SINGLE=single, STAGES=stages, SPLIT=split,
                                                PHASE=1, SLICE=sl, BP=bp, num_warps=4)
    return dx, dw, db


# ---------------------------------------------------------------- driver
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
    """(num_warps, STAGES) the library's autotuner took for the last shape it ran (compiled: its best config)."""
    c = autotuner.best_config
    return c.num_warps, c.kwargs["STAGES"]


def part_a(out, smoke, timer):
    from impls.layernorm import compiled, layernorm_eager
    shapes = [(37, 300), (130, 768), (5, 1000)] if smoke else [(16384, 768), (65536, 768)]
    variants = ([(1, 1, 2, p) for p in (0, 1, 2)] + [(2, 2, 3, 1)] if smoke else
                [(1, 1, 16, 0), (1, 1, 32, 0), (1, 1, 8, 1), (1, 1, 16, 1), (1, 1, 32, 1), (1, 1, 16, 2),
                 (1, 2, 8, 1), (1, 2, 16, 1), (2, 2, 8, 1), (2, 2, 16, 1), (2, 4, 4, 1), (4, 4, 8, 1)])
    bad = 0
    for rows, dim in shapes:
        x, _, w, b = inputs(rows, dim, "cpu" if smoke else "cuda")
        ref = torch.nn.functional.layer_norm(x.double(), (dim,), w.double(), b.double(), 1e-5)
        calls = {"lib": lambda: LN.layernorm_fwd(x, w, b, stats=False)[0]}
        if not smoke:
            comp = compiled({"tokens": rows, "dim": dim}, torch.bfloat16, "cuda")
            y = torch.empty_like(x)
            calls["compile"] = lambda: comp(x, w, b)
            calls["copy"] = lambda: y.copy_(x)
        for r, wp, per_sm, pf in variants:
            calls[f"r{r} w{wp} sm{per_sm} pf{pf}"] = (lambda r=r, wp=wp, per_sm=per_sm, pf=pf:
                                                      ln_persist(x, w, b, r, wp, per_sm, pf))
        with torch.no_grad():
            for rnd in range(1 if smoke else 3):
                for name, fn in calls.items():
                    if rnd == 0 and name != "copy":
                        err = rel([fn()], [ref])
                        bad += err > 2e-2
                        emit(out, kind="check", part="A", shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                    if timer:
                        us = timer(fn) * 1e3
                        emit(out, kind="time", part="A", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    return bad


def part_b(out, smoke, timer):
    shapes = [(37, 300), (7, 4000), (3, 16384)] if smoke else [(4096, 4096), (1024, 16384), (16384, 4096),
                                                                 (4096, 16384)]
    bad = 0
    dev = "cpu" if smoke else "cuda"
    for rows, dim in shapes:
        x, dy, w, b = inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
        rms_ref = torch.autograd.grad(xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr, (xr, wr),
                                      dy.double())
        ln_ref = torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5), (xr, wr, br),
                                     dy.double())
        RN.rmsnorm_bwd(dy, x, w, rstd)
        LN.layernorm_bwd(dy, x, w, mean, lrstd)
        rcfg = (4, 3) if smoke else chosen(RN._rmsnorm_bwd_kernel)
        lcfg = (4, 3) if smoke else chosen(LN._layernorm_bwd_kernel)
        emit(out, kind="config", part="B", shape=[rows, dim], rmsnorm=rcfg, layernorm=lcfg)
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd),
                 ("rmsnorm", "2launch"): lambda: rms_coop(dy, x, w, rstd, rcfg, False),
                 ("layernorm", "2launch"): lambda: ln_coop(dy, x, w, mean, lrstd, lcfg, False)}
        if not smoke:
            calls[("rmsnorm", "coop")] = lambda: rms_coop(dy, x, w, rstd, rcfg, True)
            calls[("layernorm", "coop")] = lambda: ln_coop(dy, x, w, mean, lrstd, lcfg, True)
        for rnd in range(1 if smoke else 3):
            for (norm, name), fn in calls.items():
                if rnd == 0:
                    try:
                        got = fn()
                    except Exception as e:  # a cooperative launch too large for the GPU says so here
                        emit(out, kind="error", part="B", norm=norm, shape=[rows, dim], variant=name, error=repr(e))
                        bad += 1
                        continue
                    err = rel(got, rms_ref if norm == "rmsnorm" else ln_ref)
                    repeat = rel(fn(), got)  # the sync counters reset: a second call gives the same result
                    ok = err <= 2e-2 and repeat == 0.0
                    bad += not ok
                    emit(out, kind="check", part="B", norm=norm, shape=[rows, dim], variant=name, err=err,
                         repeat=repeat, ok=ok)
                    if not ok:
                        continue
                if timer:
                    us = timer(fn) * 1e3
                    emit(out, kind="time", part="B", norm=norm, shape=[rows, dim], variant=name, round=rnd,
                         us=round(us, 2))
    return bad


def main(path, smoke, parts):
    out = open(path, "w") if path else None
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__,
             gpu=torch.cuda.get_device_name())
    bad = 0
    try:
        if "B" in parts:
            bad += part_b(out, smoke, timer)
        if "A" in parts:
            bad += part_a(out, smoke, timer)
    finally:
        if not smoke:
            registers(out)
    if bad:
        raise SystemExit(f"{bad} variants off")


def registers(out):
    """Registers and spills of every kernel compiled here (Triton's own ptxas on this GPU)."""
    dev = torch.cuda.current_device()
    for name, k in (("rms_bwd_coop", rms_bwd_coop), ("ln_bwd_coop", ln_bwd_coop), ("ln_fwd_persist", ln_fwd_persist),
                    ("lib_rms_bwd", RN._rmsnorm_bwd_kernel.fn), ("lib_ln_bwd", LN._layernorm_bwd_kernel.fn)):
        for key, ck in k.device_caches[dev][0].items():
            emit(out, kind="regs", kernel=name, key=str(key)[:300], n_regs=ck.n_regs, n_spills=ck.n_spills,
                 shared=ck.metadata.shared, warps=ck.metadata.num_warps)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    parts = [a for a in args if a in ("A", "B")] or ["A", "B"]
    paths = [a for a in args if a not in ("A", "B")]
    main(paths[0] if paths and not smoke else None, smoke, parts)
