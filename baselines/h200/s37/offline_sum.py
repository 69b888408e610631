"""Session 37: the partial-row sum's tiles compiled for sm_90a without a GPU (Triton's own ptxas): the registers
and spills of every tiling kernels._rows.sum_tiling picks at the partial-row counts the norm backwards launch on
an H200 (66-528) and the widths of the norms suite, beside the tilings before session 37.

Run from the repository root: python3 baselines/h200/s37/offline_sum.py   (Triton 3.6, no GPU needed)
"""
from __future__ import annotations

import os
import sys

import triton
from triton.compiler import ASTSource

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s35"))

from explore101 import compile_sm90, ptxas_info  # noqa: E402

from kernels._rows import _sum_partials_kernel, sum_tiling  # noqa: E402

SIG = {"PARTIALS": "*fp32", "OUT": "*bf16", "n_programs": "i32", "n_cols": "i32"}


def report(label, bn, bp, warps):
    kern = compile_sm90(_sum_partials_kernel, SIG, {"BN": bn, "BP": bp, "WAIT": True}, (), warps, ASTSource)
    print(f"{label}: [{bp}, {bn}] at {warps} warps: " + "; ".join(ptxas_info(kern)))


def main():
    print(f"triton {triton.__version__}, sm_90a")
    seen = set()
    for n_cols in (768, 4096, 16384):
        for n_programs in (66, 128, 132, 241, 256, 264, 525):
            tiling = sum_tiling(n_programs, n_cols)
            if tiling not in seen:
                seen.add(tiling)
                report(f"sum_tiling({n_programs}, {n_cols})", *tiling)
    report("before, under 256 partial rows", 64, 64, 4)
    report("before, from 256 partial rows", 32, 256, 8)


if __name__ == "__main__":
    main()
