"""Session 40: where rmsnorm's backward row kernel spends the time it takes over an elementwise kernel of the same
bytes (session 32, explore89, 4096 x 4096: 32.3-32.4 us without the partial-row sum against 28.5 for x + dy into
dx). The library's row kernel (its rows-that-fit-a-block path) copied with parts switched off, each launched at the
library's program count and at the config the library's autotuner picked for the shape, three rounds, bf16:
  lib            kernels.rmsnorm.rmsnorm_bwd whole (row kernel, then the partial-row sum)
  row            the library's row kernel alone (the sum not launched)
  copy           the copy below with every part on (as `row`; checked equal to it)
  no-partial     no dw partial (not accumulated, not stored)
  no-reduce      no row sum: c = 0, so dx = rstd * dy * w
  no-both        neither
  add-same-grid  dx = x + dy, the same programs walking the same tiles
  torch-add      torch.add(x, dy, out=dx), the elementwise floor explore89 measured
  rR-wW-sS       at 4096-wide rows, the copy at ROWS R, W warps, STAGES S: two-row tiles, which the autotuner's
                 prune (kernels._rows._sensible) does not offer there

Run from the repository root: python3 baselines/h200/s40/explore110.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s40/explore110.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _explore import begin, command_line, emit, norm_inputs, timed_rounds  # noqa: E402

from kernels import _rows  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

SHAPES = [(4096, 4096), (1024, 16384)]
TWO_ROWS = [(2, 8, 1), (2, 8, 3), (2, 16, 1), (2, 16, 3)]  # (ROWS, warps, STAGES) tried at 4096-wide rows
PARTS = {"copy": (True, True, False), "no-partial": (False, True, False), "no-reduce": (True, False, False),
         "no-both": (False, False, False), "add-same-grid": (False, False, True)}  # PARTIAL, REDUCE, ADD


@triton.jit
def _ablated(X, W, DY, RSTD, DX, DW_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
             BLOCK: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr, PARTIAL: tl.constexpr,
             REDUCE: tl.constexpr, ADD: tl.constexpr):
    """kernels.rmsnorm._rmsnorm_bwd_kernel's SINGLE path, with the dw partial (PARTIAL) and the row sum (REDUCE)
    switchable, or (ADD) dx = x + dy alone."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for tile in tl.range(pid, tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        row_ok = rows < n_rows
        mask = row_ok[:, None] & col_ok[None, :]
        rows64 = rows.to(tl.int64)[:, None]
        if ADD:
            x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            tl.store(DX + rows64 * stride_dx + cols[None, :], (x + dy).to(DX.dtype.element_ty), mask=mask)
        else:
            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
            xhat = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32) * rstd[:, None]
            dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            if PARTIAL:
                dw += dy * xhat
            g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
            if REDUCE:
                c = tl.sum(g * xhat, axis=1) / n_cols
                dx = rstd[:, None] * (g - xhat * c[:, None])
            else:
                dx = rstd[:, None] * g
            tl.store(DX + rows64 * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
    if PARTIAL:
        tl.store(DW_PARTIAL + pid.to(tl.int64) * n_cols + cols, tl.sum(dw, axis=0), mask=col_ok)


def main(shapes, path, smoke):
    out, dev = begin(path, smoke)
    shapes = [(8, 64), (37, 300)] if smoke else shapes
    calls = {}
    for rows, dim in shapes:
        x, dy, w, _ = norm_inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        block, single = _rows.row_block(dim)
        assert single, "rows that fit a block only"
        programs, _ = _rows.reduction_programs(rows, block, x.device)
        seen = {}
        real = RN.sum_partials

        def spy(partials, dtype, seen=seen):
            seen["partials"] = partials.clone()
            return real(partials, dtype)
        RN.sum_partials = spy
        try:
            dx_lib, _ = RN.rmsnorm_bwd(dy, x, w, rstd)
        finally:
            RN.sum_partials = real
        cfg = RN._rmsnorm_bwd_kernel.best_config
        meta = {**cfg.kwargs, "num_warps": cfg.num_warps}
        emit(out, kind="config", shape=[rows, dim], programs=programs, ROWS=meta["ROWS"], STAGES=meta["STAGES"],
             num_warps=cfg.num_warps)
        dx = torch.empty_like(x)
        partials = torch.empty(1, programs, dim, dtype=torch.float32, device=x.device)

        def ablated(parts, x=x, dy=dy, w=w, rstd=rstd, dx=dx, partials=partials, rows=rows, dim=dim, block=block,
                    programs=programs, meta=meta):
            partial, reduce, add = parts
            return lambda: _ablated[(programs,)](x, w, dy, rstd, dx, partials[0], x.stride(0), dy.stride(0),
                                                 dx.stride(0), rows, dim, BLOCK=block, PARTIAL=partial,
                                                 REDUCE=reduce, ADD=add, **meta)

        def tiled(r, wa, st, x=x, dy=dy, w=w, rstd=rstd, dx=dx, partials=partials, rows=rows, dim=dim, block=block,
                  programs=programs):
            return lambda: _ablated[(programs,)](x, w, dy, rstd, dx, partials[0], x.stride(0), dy.stride(0),
                                                 dx.stride(0), rows, dim, BLOCK=block, PARTIAL=True, REDUCE=True,
                                                 ADD=False, ROWS=r, STAGES=st, num_warps=wa)

        def row_only(x=x, dy=dy, w=w, rstd=rstd, dx=dx, partials=partials, rows=rows, dim=dim, block=block,
                     programs=programs, rpp=_rows.reduction_programs(rows, block, x.device)[1]):
            RN._rmsnorm_bwd_kernel[(programs,)](x, w, dy, rstd, dx, partials[0], x.stride(0), dy.stride(0),
                                                dx.stride(0), rows, dim, rpp, BLOCK=block, SINGLE=True)

        ablated(PARTS["copy"])()
        same = bool(torch.equal(dx, dx_lib) and torch.equal(partials, seen["partials"]))
        emit(out, kind="check", shape=[rows, dim], what="copy equals the library's row kernel", ok=same)
        calls[(rows, dim, "lib")] = lambda x=x, dy=dy, w=w, rstd=rstd: RN.rmsnorm_bwd(dy, x, w, rstd)
        calls[(rows, dim, "row")] = row_only
        for name, parts in PARTS.items():
            calls[(rows, dim, name)] = ablated(parts)
        calls[(rows, dim, "torch-add")] = lambda x=x, dy=dy, dx=dx: torch.add(x, dy, out=dx)
        if dim == 4096 or smoke:
            for r, wa, st in TWO_ROWS:
                calls[(rows, dim, f"r{r}-w{wa}-s{st}")] = tiled(r, wa, st)
    for fn in calls.values():
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    timed_rounds(out, calls, dev)


if __name__ == "__main__":
    main(*command_line(SHAPES))
