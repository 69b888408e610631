"""Session 37: at 16K-wide rows the one-step sum (kernels._rows.sum_tiling: [BP, 4096 / BP] tiles at 4 warps) was
about 1% slower than the two 64-row steps before it for rmsnorm at 128 partial rows (explore107, 107b). Here, at
16K-wide rows, each norm backward whole with its sum as the library takes it (`lib`), as before session 37
(`before`: [64, 64] tiles, 4 warps, steps of 64 rows) and in one step with 64 columns a program (`one-64`:
[BP, 64] tiles, 4 warps), three rounds, bf16, timed by bench.timing; each sum checked as in explore106.

Run from the repository root: python3 baselines/h200/s37/explore108.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s37/explore108.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import explore106  # noqa: E402
from explore106 import _rows  # noqa: E402
from explore107 import before  # noqa: E402


def one_64(partials, dtype):
    """Every partial row in one step, 64 columns a program, 4 warps."""
    k, n_programs, n_cols = partials.shape
    out = torch.empty(k, n_cols, dtype=dtype, device=partials.device)
    bp, bn = triton.next_power_of_2(n_programs), min(64, triton.next_power_of_2(n_cols))
    _rows._sum_partials_kernel[(triton.cdiv(n_cols, bn), k)](partials, out, n_programs, n_cols, BN=bn, BP=bp,
                                                             num_warps=4, **_rows.dependent_kwargs(partials.device))
    return out


if __name__ == "__main__":
    explore106.SUMS = {"lib": _rows.sum_partials, "before": before, "one-64": one_64}
    explore106.SHAPES = [(1024, 16384), (4096, 16384), (924, 16384)]
    smoke = "--smoke" in sys.argv
    picked = [a for a in sys.argv[1:] if a[:1].isdigit()]  # shapes ROWSxDIM in place of the list above
    paths = [a for a in sys.argv[1:] if not a.startswith("--") and a not in picked]
    if picked:
        explore106.SHAPES = [tuple(int(v) for v in a.split("x")) for a in picked]
    explore106.main(paths[0] if paths else None, smoke)
