"""Session 33: which kernels Triton compiles for a cluster of CTAs (num_ctas > 1, sm_90a), offline, no GPU.

explore94's kernels failed to compile on the device (Triton 3.6): softmax's rows with "parent layout must have at
least rank >= 2", the norm backwards with "Result has an invalid layout" in TritonGPUPlanCTAPass. This compiles,
for 2 CTAs: an elementwise kernel, a row softmax written on 2-D tensors throughout ([1, BLOCK], reductions that
keep their dimension), and the same row as [2, BLOCK / 2]. Run it with the Triton to test on the path first:

  PYTHONPATH=<site-packages holding triton 3.6> python3 baselines/h200/s33/offline_clusters.py
  python3 baselines/h200/s33/offline_clusters.py          (the project's venv: Triton 3.9)
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _elementwise(X, Y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n) * 2, mask=i < n)


@triton.jit
def _softmax_2d(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)[None, :]
    ok = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1, keep_dims=True))
    y = e * (1.0 / tl.sum(e, axis=1, keep_dims=True))
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=ok)


@triton.jit
def _softmax_folded(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr, P: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, P)[:, None] * (BLOCK // P) + tl.arange(0, BLOCK // P)[None, :]
    ok = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    m = tl.max(tl.max(x, axis=1, keep_dims=True), axis=0, keep_dims=True)
    e = tl.exp(x - m)
    s = tl.sum(tl.sum(e, axis=1, keep_dims=True), axis=0, keep_dims=True)
    tl.store(Y + row * stride_y + cols, (e * (1.0 / s)).to(Y.dtype.element_ty), mask=ok)


ROW = {"X": "*bf16", "Y": "*bf16", "stride_x": "i32", "stride_y": "i32", "n_cols": "i32", "BLOCK": "constexpr"}


def compiles(fn, signature, constexprs, warps, ctas) -> str:
    attrs = {(i,): [["tt.divisibility", 16]] for i, kind in enumerate(signature.values()) if kind != "constexpr"}
    try:
        kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                                target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_ctas": ctas})
    except Exception as e:  # the compiler's own error is printed above it on stderr
        return f"fails ({type(e).__name__})"
    return "compiles" + (" (cluster launch in the PTX)" if ".reqnctapercluster" in kernel.asm["ptx"] else "")


def main():
    print(f"triton {triton.__version__}, sm_90a, 2 CTAs")
    print("elementwise, 8192 a program, 8 warps:",
          compiles(_elementwise, {"X": "*bf16", "Y": "*bf16", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 8192}, 8, 2))
    print("softmax row [1, 16384], 16 warps:", compiles(_softmax_2d, ROW, {"BLOCK": 16384}, 16, 2))
    print("softmax row [2, 8192], 16 warps:",
          compiles(_softmax_folded, {**ROW, "P": "constexpr"}, {"BLOCK": 16384, "P": 2}, 16, 2))


if __name__ == "__main__":
    main()
