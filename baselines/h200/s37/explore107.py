"""Session 37: the partial-row sum as the library now tiles it (kernels._rows.sum_tiling: every partial row in one
step) against the tiling before (steps of 64 partial rows at 4 warps, 32 columns a program, or of 256 at 8 warps
from 256 partial rows up, 64 columns), each norm backward whole, at the library's program counts, three rounds,
bf16, timed by bench.timing; each sum checked against the float64 sum of its partial rows (explore106's check).

Run from the repository root: python3 baselines/h200/s37/explore107.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s37/explore107.py --smoke   (CPU)
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


def before(partials, dtype):
    """sum_partials as it was until session 37."""
    k, n_programs, n_cols = partials.shape
    out = torch.empty(k, n_cols, dtype=dtype, device=partials.device)
    bn, bp, warps = (32, 256, 8) if n_programs >= 256 else (64, 64, 4)
    bn = min(bn, triton.next_power_of_2(n_cols))
    _rows._sum_partials_kernel[(triton.cdiv(n_cols, bn), k)](partials, out, n_programs, n_cols, BN=bn, BP=bp,
                                                             num_warps=warps, **_rows.dependent_kwargs(partials.device))
    return out


if __name__ == "__main__":
    explore106.SUMS = {"before": before, "lib": _rows.sum_partials}
    explore106.SHAPES = [(4092, 4096), (4096, 4096), (924, 16384), (1024, 16384), (65536, 768), (2048, 2048)]
    smoke = "--smoke" in sys.argv
    picked = [a for a in sys.argv[1:] if a[:1].isdigit()]  # shapes ROWSxDIM in place of the list above
    paths = [a for a in sys.argv[1:] if not a.startswith("--") and a not in picked]
    if picked:
        explore106.SHAPES = [tuple(int(v) for v in a.split("x")) for a in picked]
    explore106.main(paths[0] if paths else None, smoke)
