"""Session 66: explore149's descriptor kernels compiled offline for sm_90a (no GPU needed): shared memory,
registers, spills, the wgmma Triton makes, and the 4-byte shared-memory stores a thread makes a step where it
transposes a tf32 tile that is not K-major (A^T of the backward's dB, or a row-major B) on the way to wgmma.
Compiled by session 35's helpers (explore101.compile_sm90, ptxas_info). Triton here is the CPU machine's (3.9);
the device's is 3.6, whose code may differ.

Run from the repository root: python3 baselines/h200/s66/offline149.py
"""
from __future__ import annotations

import os
import re
import sys

import triton
from triton.compiler import ASTSource

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s35"))

from explore149 import POINTS, variants  # noqa: E402  (puts explore144 and the repository on the path)
from explore101 import compile_sm90, ptxas_info  # noqa: E402
from explore144 import _desc_kernel  # noqa: E402

INTEGERS = ("M", "N", "K", "s_a", "s_b", "s_c")  # declared divisible by 16, as the launch specializes them


def compiled(elem: str, a_t: bool, b_t: bool, precision: str, conf) -> str:
    bm, bn, bk, warps, stages, subtile = conf
    signature = {"A": elem, "B": elem, "C": elem, **dict.fromkeys(INTEGERS, "i32"), "PROGRAMS": "i32"}
    constexprs = {"A_T": a_t, "B_T": b_t, "PRECISION": precision, "BM": bm, "BN": bn, "BK": bk, "GROUP": 8,
                  "SUBTILE": subtile}
    kernel = compile_sm90(_desc_kernel, signature, constexprs, INTEGERS, warps, ASTSource, num_stages=stages)
    ptx = kernel.asm["ptx"]
    mma = ", ".join(sorted(set(re.findall(r"(wgmma\.mma_async\S*|mma\.sync\S*)", ptx))))
    return (f"shared {kernel.metadata.shared} B; {'; '.join(ptxas_info(kernel))}; {mma}; "
            f"{len(re.findall(r'st[.]shared[.]b32', ptx))} st.shared.b32")


def main() -> None:
    print(f"triton {triton.__version__}, sm_90a")
    seen = set()
    for dtype, site, M, _, _ in POINTS:
        for variant, conf, layout in variants(dtype, M):
            a_t, b_t = site == "dB" and layout == "as_is", layout == "k_major"  # how explore144's launch sees them
            key = (dtype, a_t, b_t, conf)
            if variant == "desc" or key in seen:  # one program a tile: the same code as one an SM
                continue
            seen.add(key)
            elem, precision = ("*fp32", "tf32") if dtype == "tf32" else ("*bf16", "ieee")
            print(dtype, site, layout, conf, compiled(elem, a_t, b_t, precision, conf))


if __name__ == "__main__":
    main()
