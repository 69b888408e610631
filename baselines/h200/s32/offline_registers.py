"""Session 32: registers and spills of explore94's kernels, compiled offline for sm_90a (no GPU needed).

Triton compiles each kernel to PTX for a Hopper target and its bundled ptxas (ptxas-blackwell: the plain one
refuses Triton 3.9's PTX version) reports registers and spills. Pointers and strides are marked 16-divisible, as
the launcher specializes them. Triton here is the CPU machine's (3.9); the device's is 3.6, whose counts may differ.

Run from the repository root: python3 baselines/h200/s32/offline_registers.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, HERE)

from explore94 import _softmax_row  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas-blackwell")
UNALIGNED = ("n_rows", "rows_per_program")  # runtime values the launcher would not find 16-divisible
SOFTMAX = {"X": "*bf16", "Y": "*bf16", "stride_x": "i32", "stride_y": "i32", "n_cols": "i32", "BLOCK": "constexpr"}
LN_BWD = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "MEAN": "*fp32", "RSTD": "*fp32", "DX": "*bf16",
          "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32",
          "n_rows": "i32", "n_cols": "i32", "rows_per_program": "i32", "BLOCK": "constexpr", "SINGLE": "constexpr",
          "ROWS": "constexpr", "STAGES": "constexpr", "SPLIT": "constexpr"}
RMS_BWD = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "RSTD": "*fp32", "DX": "*bf16", "DW_PARTIAL": "*fp32",
           "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "n_rows": "i32", "n_cols": "constexpr",
           "rows_per_program": "i32", "BLOCK": "constexpr", "SINGLE": "constexpr", "ROWS": "constexpr",
           "STAGES": "constexpr"}


def counts(fn, signature, constexprs, warps, ctas) -> str:
    attrs = {(i,): [["tt.divisibility", 16]] for i, (name, kind) in enumerate(signature.items())
             if kind != "constexpr" and name not in UNALIGNED}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_ctas": ctas})
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "k.ptx")
        with open(ptx, "w") as f:
            f.write(kernel.asm["ptx"])
        log = subprocess.run([PTXAS, "-arch=sm_90a", "-v", ptx, "-o", os.path.join(tmp, "k.o")],
                             capture_output=True, text=True).stderr
    info = [line.split(":", 1)[-1].strip() for line in log.splitlines() if "registers" in line or "spill" in line]
    return f"{'; '.join(info)}; shared {kernel.metadata.shared} B"


def main():
    print(f"triton {triton.__version__}, sm_90a")
    for block, ctas, warps in [(16384, 2, 16), (65536, 4, 16), (65536, 2, 32), (65536, 8, 8), (262144, 8, 32),
                               (262144, 8, 16)]:
        print(f"softmax row {block} wide, {ctas} CTAs x {warps} warps:",
              counts(_softmax_row, SOFTMAX, {"BLOCK": block}, warps, ctas))
    for stages in (1, 3):
        for ctas in (1, 2):
            print(f"layernorm bwd whole rows 16K, stages {stages}, {ctas} CTAs x 16 warps:",
                  counts(LN._layernorm_bwd_kernel.fn, LN_BWD, {"BLOCK": 16384, "SINGLE": True, "ROWS": 1,
                                                               "STAGES": stages, "SPLIT": False}, 16, ctas))
            print(f"rmsnorm bwd whole rows 16K, stages {stages}, {ctas} CTAs x 16 warps:",
                  counts(RN._rmsnorm_bwd_kernel.fn, RMS_BWD, {"n_cols": 16384, "BLOCK": 16384, "SINGLE": True,
                                                             "ROWS": 1, "STAGES": stages}, 16, ctas))
    print("layernorm bwd split 16K (the library's), stages 3, 1 CTA x 8 warps:",
          counts(LN._layernorm_bwd_kernel.fn, LN_BWD, {"BLOCK": 16384, "SINGLE": True, "ROWS": 1, "STAGES": 3,
                                                       "SPLIT": True}, 8, 1))


if __name__ == "__main__":
    main()
