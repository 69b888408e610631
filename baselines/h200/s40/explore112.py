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
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from explore110 import _ablated, emit  # noqa: E402

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import _rows  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402

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


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    shapes = [(37, 300)] if smoke else SHAPES
    programs_list = (4, 8) if smoke else PROGRAMS
    configs = ((4, 3),) if smoke else CONFIGS
    calls = {}
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
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
    for rnd in range(3):
        for (rows, dim, name, programs, warps, stages), fn in calls.items():
            s = time_call(fn, dev, TimingConfig()).summary()
            emit(out, kind="time", round=rnd, shape=[rows, dim], impl=name, programs=programs, warps=warps,
                 stages=stages, median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])


if __name__ == "__main__":
    picked = [a for a in sys.argv[1:] if a[:1].isdigit()]
    if picked:
        SHAPES = [tuple(int(v) for v in a.split("x")) for a in picked]
    paths = [a for a in sys.argv[1:] if not a.startswith("--") and a not in picked]
    main(paths[0] if paths else None, "--smoke" in sys.argv)
