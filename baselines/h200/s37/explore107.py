"""Session 37: the partial-row sum as the library now tiles it (kernels._rows.sum_tiling: every partial row in one
step) against the tiling before (steps of 64 partial rows at 4 warps, 64 columns a program, or of 256 at 8 warps
from 256 partial rows up, 32 columns), each norm backward whole, at the library's program counts, three rounds,
bf16, timed by bench.timing; each sum checked against the float64 sum of its partial rows (explore106's check).

Run from the repository root: python3 baselines/h200/s37/explore107.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s37/explore107.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import explore106  # noqa: E402
from explore106 import _rows  # noqa: E402


def before(n_programs, n_cols):
    """sum_partials' tiling until session 37: (BN, BP, warps)."""
    bn, bp, warps = (32, 256, 8) if n_programs >= 256 else (64, 64, 4)
    return min(bn, triton.next_power_of_2(n_cols)), bp, warps


if __name__ == "__main__":
    explore106.cli({"before": explore106.summed_as(before), "lib": _rows.sum_partials},
                   [(4092, 4096), (4096, 4096), (924, 16384), (1024, 16384), (65536, 768), (2048, 2048)])
