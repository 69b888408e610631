"""Session 40: rmsnorm's backward at 4096 x 4096 against the number of programs, with the warps and stages of each.

explore110 found the library's persistent grid (256 programs, each walking 16 rows and then writing its dw partial
row) costing 2.0 us even for a plain add (30.7 us against torch.add's 28.7), and the partial rows' sum 2.1-2.5.
More programs hide more latency but write more partial rows for the sum to read. Here, for each program count,
warps and stages: `add` (explore110's add-same-grid: dx = x + dy on that grid) and `bwd` (explore110's copy of
the library's row kernel on that grid, then the library's partial-row sum: the whole backward), three rounds,
bf16, timed by bench.timing. Each bwd is checked against the library's dx and dw.

Run from the repository root: python3 baselines/h200/s40/explore112.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s40/explore112.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _explore import begin, command_line, emit, norm_inputs, timed_rounds  # noqa: E402
from explore110 import _ablated  # noqa: E402

from kernels import _rows  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

SHAPES = [(4096, 4096)]
PROGRAMS = (256, 264, 396, 528, 1056)
CONFIGS = ((4, 3), (8, 1), (8, 3), (8, 4))  # (warps, STAGES), one row a tile


def on_grid(x, dy, w, rstd, programs, warps, stages, add):
    """dx (and, unless `add`, dw) from explore110's kernel on `programs` programs."""
    rows, dim = x.shape
    block = _rows.row_block(dim)[0]
    dx = torch.empty_like(x)
    partials = torch.empty(1, programs, dim, dtype=torch.float32, device=x.device)

    def call():
        _ablated[(programs,)](x, w, dy, rstd, dx, partials[0], x.stride(0), dy.stride(0), dx.stride(0), rows, dim,
                              BLOCK=block, ROWS=1, STAGES=stages, PARTIAL=not add, REDUCE=not add, ADD=add,
                              num_warps=warps)
        return dx if add else (dx, _rows.sum_partials(partials, w.dtype)[0])
    return call


def main(shapes, path, smoke):
    out, dev = begin(path, smoke)
    shapes = [(37, 300)] if smoke else shapes
    programs_list = (4, 8) if smoke else PROGRAMS
    configs = ((4, 3),) if smoke else CONFIGS
    calls = {}
    for rows, dim in shapes:
        x, dy, w, _ = norm_inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        dx_lib, dw_lib = RN.rmsnorm_bwd(dy, x, w, rstd)
        calls[(rows, dim, "lib", 0, 0, 0)] = lambda x=x, dy=dy, w=w, rstd=rstd: RN.rmsnorm_bwd(dy, x, w, rstd)
        for programs in programs_list:
            for warps, stages in configs:
                bwd = on_grid(x, dy, w, rstd, programs, warps, stages, add=False)
                dx, dw = bwd()
                dw_err = float((dw.double() - dw_lib.double()).norm() / dw_lib.double().norm())
                emit(out, kind="check", shape=[rows, dim], programs=programs, warps=warps, stages=stages,
                     dx_equal=bool(torch.equal(dx, dx_lib)), dw_rel_diff=dw_err, ok=dw_err < 1e-2)
                calls[(rows, dim, "bwd", programs, warps, stages)] = bwd
                calls[(rows, dim, "add", programs, warps, stages)] = on_grid(x, dy, w, rstd, programs, warps, stages,
                                                                             add=True)
        calls[(rows, dim, "torch-add", 0, 0, 0)] = lambda x=x, dy=dy: torch.add(x, dy)
    for fn in calls.values():
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    timed_rounds(out, calls, dev, lambda key: dict(zip(("impl", "programs", "warps", "stages"), key[2:]),
                                                   shape=list(key[:2])))


if __name__ == "__main__":
    main(*command_line(SHAPES))
