"""Session 41: rmsnorm's backward with rows handed out at run time (a ticket counter) instead of each program
walking a fixed stride of rows.

explore110 found the library's persistent grid costs 1.4-2.0 us at 4096 x 4096 over torch.add of the same bytes,
and explore112 an add walking rows pid, pid + P, ... took 29.6-31.2 us against torch.add's 28.7 at any program
count. Here each program takes its first row by its id, every later one from an atomic ticket counter (relaxed), so
a program that ran slow takes fewer rows and none idles at the end while another finishes its share. The loop is a
while loop with the next DEPTH rows' x, dy (and rstd) loaded into registers by hand before the row in hand is
computed, as the compiler's pipeliner cannot follow tickets. The last program to finish zeroes the counter for the
next call (explore-only shared state). Each program keeps its own fp32 dw partial row, summed by the library's
sum_partials (a dependent launch), so dw depends on which program took which row (not bit-reproducible; checked
against the library's within 1e-5 relative). Timed by bench.timing, three rounds in alternation, bf16:
  lib                 kernels.rmsnorm.rmsnorm_bwd whole (row kernel, then the partial-row sum)
  row                 the library's row kernel alone
  torch-add           torch.add(x, dy, out=dx), explore89's elementwise floor
  add-pipe            dx = x + dy walking rows pid, pid + P, ... with tl.range's pipeliner (explore110's
                      add-same-grid) at the library's programs, warps and stages
  K-S|D-pP-wW-dD      K add (dx = x + dy) or bwd (the whole backward: this row kernel, then the library's sum);
                      S static (rows pid, pid + P, ...) or D dynamic (tickets); P programs, W warps, DEPTH D rows
                      loaded ahead by hand
Checks: every bwd's dx bit-equal to the library's (which holds only at the library's warp count) and dw within 1e-5
of the library's largest |dw|; the static bwd's partial rows bit-equal to the library's row kernel's (same programs,
one-row tiles); the adds equal to torch.add; the counter back to zero.

Run from the repository root: python3 baselines/h200/s41/explore113.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s41/explore113.py --smoke   (CPU)
                              python3 baselines/h200/s41/explore113.py --offline   (compiled for sm_90a, no GPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, command_line, compile_offline, emit, norm_inputs, timed_rounds  # noqa: E402
from explore110 import _ablated  # noqa: E402

from kernels import _rows  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

SHAPES = [(4096, 4096), (1024, 16384)]
GRIDS = {4096: ([256, 264, 396, 528], [4, 8], [1, 2]), 16384: ([128, 132, 264], [16, 32], [1])}  # P, warps, DEPTH


@triton.jit
def _load(X, DY, RSTD, row, n_rows, stride_x, stride_dy, n_cols, BLOCK: tl.constexpr, ADD: tl.constexpr):
    """Row `row`'s x, dy (as stored) and rstd; nothing is read for a row past the end."""
    r64 = row.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < tl.where(row < n_rows, n_cols, 0)
    x = tl.load(X + r64 * stride_x + cols, mask=m, other=0.0)
    dy = tl.load(DY + r64 * stride_dy + cols, mask=m, other=0.0)
    if ADD:
        rstd = 0.0
    else:
        rstd = tl.load(RSTD + tl.minimum(row, n_rows - 1))  # a real row's, unused past the end
    return x, dy, rstd


@triton.jit
def _ticket(CNT, prev, P, DYN: tl.constexpr):
    """The row after `prev` for this program: the next ticket past the first P rows, or prev + P."""
    if DYN:
        nxt = P + tl.atomic_add(CNT, 1, sem="relaxed")
    else:
        nxt = prev + P
    return nxt


@triton.jit
def _step(W, DX, row, x, dy, rstd, stride_dx, n_cols, BLOCK: tl.constexpr, ADD: tl.constexpr):
    """dx for one row (as the library's row kernel computes it) and its dw term."""
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    out = DX + row.to(tl.int64) * stride_dx + cols
    if ADD:
        tl.store(out, (x.to(tl.float32) + dy.to(tl.float32)).to(DX.dtype.element_ty), mask=col_ok)
        term = tl.zeros([BLOCK], dtype=tl.float32)
    else:
        xhat = x.to(tl.float32) * rstd
        dyf = dy.to(tl.float32)
        term = dyf * xhat
        g = dyf * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
        c = tl.sum(g * xhat, axis=0) / n_cols
        tl.store(out, (rstd * (g - xhat * c)).to(DX.dtype.element_ty), mask=col_ok)
    return term


@triton.jit
def _walk(X, W, DY, RSTD, DX, DW_PARTIAL, CNT, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
          BLOCK: tl.constexpr, DEPTH: tl.constexpr, DYN: tl.constexpr, ADD: tl.constexpr):
    """Rows pid, then tickets (DYN) or pid + P, pid + 2P, ...; DEPTH (1 or 2) rows loaded ahead of the one computed."""
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    t = pid
    xa, da, ra = _load(X, DY, RSTD, t, n_rows, stride_x, stride_dy, n_cols, BLOCK, ADD)
    n1 = _ticket(CNT, t, P, DYN)
    if DEPTH == 2:
        xb, db, rb = _load(X, DY, RSTD, n1, n_rows, stride_x, stride_dy, n_cols, BLOCK, ADD)
        n2 = _ticket(CNT, n1, P, DYN)
        while t < n_rows:
            xc, dc, rc = _load(X, DY, RSTD, n2, n_rows, stride_x, stride_dy, n_cols, BLOCK, ADD)
            n3 = _ticket(CNT, n2, P, DYN)
            dw += _step(W, DX, t, xa, da, ra, stride_dx, n_cols, BLOCK, ADD)
            t = n1
            n1 = n2
            n2 = n3
            xa, da, ra = xb, db, rb
            xb, db, rb = xc, dc, rc
    else:
        while t < n_rows:
            xb, db, rb = _load(X, DY, RSTD, n1, n_rows, stride_x, stride_dy, n_cols, BLOCK, ADD)
            n2 = _ticket(CNT, n1, P, DYN)
            dw += _step(W, DX, t, xa, da, ra, stride_dx, n_cols, BLOCK, ADD)
            t = n1
            n1 = n2
            xa, da, ra = xb, db, rb
    if not ADD:
        cols = tl.arange(0, BLOCK)
        tl.store(DW_PARTIAL + pid.to(tl.int64) * n_cols + cols, dw, mask=cols < n_cols)
    if DYN:  # every program has taken its last ticket before it counts itself done; the last one resets
        if tl.atomic_add(CNT + 1, 1, sem="acq_rel") == P - 1:
            tl.atomic_xchg(CNT, 0, sem="relaxed")
            tl.atomic_xchg(CNT + 1, 0, sem="relaxed")


def walked(kind, dyn, programs, warps, depth, x, dy, w, rstd, dx, partials, cnt, block):
    """A call of _walk; for `bwd` the whole backward (the walk, then the library's sum of the partial rows)."""
    rows, dim = x.shape
    add = kind == "add"

    def call():
        _walk[(programs,)](x, w, dy, rstd, dx, partials[0], cnt, x.stride(0), dy.stride(0), dx.stride(0), rows, dim,
                           BLOCK=block, DEPTH=depth, DYN=dyn, ADD=add, num_warps=warps)
        return None if add else RN.sum_partials(partials[:, :programs], w.dtype)[0]
    return call


def offline():
    """Every (shape, warps, DEPTH, DYN, ADD) of GRIDS compiled for sm_90a (no GPU): ptxas's registers and spills."""
    print(f"triton {triton.__version__}, sm_90a")
    sig = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "RSTD": "*fp32", "DX": "*bf16", "DW_PARTIAL": "*fp32",
           "CNT": "*i32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "n_rows": "i32"}
    for dim, (_, warps_list, depths) in GRIDS.items():
        for warps in warps_list:
            for depth in depths:
                for dyn in (False, True):
                    for add in (False, True):
                        consts = {"n_cols": dim, "BLOCK": dim, "DEPTH": depth, "DYN": dyn, "ADD": add}
                        _, ptxas = compile_offline(_walk, sig, consts, ("stride_x", "stride_dy", "stride_dx"), warps)
                        print(f"{dim} {'add' if add else 'bwd'}-{'D' if dyn else 'S'} w{warps} d{depth}: "
                              + "; ".join(ptxas))


def main(shapes, path, smoke):
    out, dev = begin(path, smoke)
    shapes = [(8, 64), (37, 300)] if smoke else shapes
    calls = {}
    for rows, dim in shapes:
        x, dy, w, _ = norm_inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        block, single = _rows.row_block(dim)
        assert single, "rows that fit a block only"
        lib_programs, rpp = _rows.reduction_programs(rows, block, x.device)
        lib_partials = torch.empty(1, lib_programs, dim, dtype=torch.float32, device=dev)
        lib_dx = torch.empty_like(x)

        def row_only(x=x, dy=dy, w=w, rstd=rstd, dx=lib_dx, partials=lib_partials, rows=rows, dim=dim, block=block,
                     rpp=rpp):
            RN._rmsnorm_bwd_kernel[(partials.shape[1],)](x, w, dy, rstd, dx, partials[0], x.stride(0), dy.stride(0),
                                                         dx.stride(0), rows, dim, rpp, BLOCK=block, SINGLE=True)
        row_only()
        _, lib_dw = RN.rmsnorm_bwd(dy, x, w, rstd)
        cfg = RN._rmsnorm_bwd_kernel.best_config
        meta = {**cfg.kwargs, "num_warps": cfg.num_warps}
        emit(out, kind="config", shape=[rows, dim], programs=lib_programs, **meta)
        add_ref = torch.add(x, dy)
        dx = torch.empty_like(x)
        cnt = torch.zeros(2, dtype=torch.int32, device=dev)
        grid_p, grid_w, grid_d = GRIDS.get(dim, ([lib_programs, 3], [4], [1, 2]))
        partials = torch.empty(1, max(grid_p + [lib_programs]), dim, dtype=torch.float32, device=dev)
        calls[(rows, dim, "lib")] = lambda x=x, dy=dy, w=w, rstd=rstd: RN.rmsnorm_bwd(dy, x, w, rstd)
        calls[(rows, dim, "row")] = row_only
        calls[(rows, dim, "torch-add")] = lambda x=x, dy=dy, dx=dx: torch.add(x, dy, out=dx)
        calls[(rows, dim, "add-pipe")] = (
            lambda x=x, dy=dy, w=w, rstd=rstd, dx=dx, p=partials, rows=rows, dim=dim, block=block, n=lib_programs:
            _ablated[(n,)](x, w, dy, rstd, dx, p[0], x.stride(0), dy.stride(0), dx.stride(0), rows, dim, BLOCK=block,
                           PARTIAL=False, REDUCE=False, ADD=True, **meta))
        for kind in ("add", "bwd"):
            for dyn in (False, True):
                for programs in grid_p:
                    for warps in grid_w:
                        for depth in grid_d:
                            name = f"{kind}-{'D' if dyn else 'S'}-p{programs}-w{warps}-d{depth}"
                            fn = walked(kind, dyn, programs, warps, depth, x, dy, w, rstd, dx, partials, cnt, block)
                            dx.fill_(float("nan"))
                            dw = fn()
                            ref = add_ref if kind == "add" else lib_dx
                            # the CPU interpreter's casts to bf16 may round differently from torch's by one ulp
                            checks = {"dx": torch.equal(dx, ref) or smoke and torch.allclose(dx, ref, rtol=1e-2),
                                      "counter": cnt.tolist() == [0, 0]}
                            if kind == "bwd":
                                err = ((dw.float() - lib_dw.float()).abs().max() / lib_dw.float().abs().max()).item()
                                checks["dw"] = err <= 1e-5
                                if not dyn and programs == lib_programs and meta["ROWS"] == 1:
                                    checks["partials"] = torch.equal(partials[:, :programs], lib_partials)
                            emit(out, kind="check", shape=[rows, dim], impl=name, ok=all(checks.values()),
                                 **{k: bool(v) for k, v in checks.items()})
                            calls[(rows, dim, name)] = fn
    for fn in calls.values():
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    timed_rounds(out, calls, dev)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main(*command_line(SHAPES))
