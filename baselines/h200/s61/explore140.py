"""Session 61: the Triton GEMM at tf32 with its operands made K-major first (kernels/matmul.py, the launcher copies a
row-major B, and the backward's M-major A^T and N-major dC, to K-major on Hopper) against the same kernel on the
operands as they come, at the matmul suite's tf32 points: the forward (A K-major, B N-major) and the backward's
dB = A^T @ dC (both operands transposed), each through bench.timing, torch.matmul (tf32) beside them. The old path
is the kernel's own autotuner on a fresh cache per call site (the autotuner keys on M, N, K, not on strides).

Run from the repository root: python3 baselines/h200/s61/explore140.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.getcwd(), "baselines", "h200", "s40"))

from _explore import begin, emit  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import matmul as km  # noqa: E402

SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 11008, 4096),
          (4095, 4097, 1000)]


def fresh():
    return triton.autotune(configs=km._matmul_kernel.configs, key=["M", "N", "K", "PRECISION"])(km._matmul_kernel.fn)


def as_is(kern, a, b, c, precision="tf32"):
    """The kernel on a and b as they are (the launcher before session 61)."""
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
    kern[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
               PRECISION=precision, UPCAST=False)
    return c


def main() -> None:
    out, dev = begin(sys.argv[1], False)
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = TimingConfig(max_time_s=1.0)
    for M, N, K in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.randn(M, K, device=dev, generator=g)
        b = torch.randn(K, N, device=dev, generator=g)
        dc = torch.randn(M, N, device=dev, generator=g)
        calls = {  # (site, impl) -> (call, reference, output)
            ("fwd", "cublas"): (lambda: torch.matmul(a, b), None),
            ("fwd", "as_is"): (lambda k=fresh(), c=torch.empty(M, N, device=dev): as_is(k, a, b, c), a @ b),
            ("fwd", "k_major"): (lambda: km.matmul_fwd(a, b, "tf32"), a @ b),
            ("dB", "cublas"): (lambda: torch.matmul(a.t(), dc), None),
            ("dB", "as_is"): (lambda k=fresh(), c=torch.empty(K, N, device=dev): as_is(k, a.t(), dc, c), a.t() @ dc),
            ("dB", "k_major"): (lambda: km.matmul_fwd(a.t(), dc, "tf32"), a.t() @ dc),
        }
        for (site, impl), (call, ref) in calls.items():
            got = call()
            err = None if ref is None else float((got - ref).norm() / ref.norm())
            s = time_call(call, dev, cfg).summary()
            emit(out, kind="time", shape=[M, N, K], site=site, impl=impl, median_us=round(s["median_ms"] * 1e3, 2),
                 p20_us=round(s["p20_ms"] * 1e3, 2), p80_us=round(s["p80_ms"] * 1e3, 2), rel_err=err)


if __name__ == "__main__":
    main()
