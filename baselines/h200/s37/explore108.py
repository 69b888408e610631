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

import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import explore106  # noqa: E402
from explore106 import _rows  # noqa: E402
from explore107 import before  # noqa: E402


def one_64(n_programs, n_cols):
    """Every partial row in one step, 64 columns a program, 4 warps: (BN, BP, warps)."""
    return min(64, triton.next_power_of_2(n_cols)), triton.next_power_of_2(n_programs), 4


if __name__ == "__main__":
    explore106.cli({"lib": _rows.sum_partials, "before": explore106.summed_as(before),
                    "one-64": explore106.summed_as(one_64)}, [(1024, 16384), (4096, 16384), (924, 16384)])
