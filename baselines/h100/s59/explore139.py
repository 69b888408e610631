"""Session 59: the Triton GEMM at tf32 reads 4.3-4.8x slower than cuBLAS on an H200 (baselines/h200/matmul.jsonl:
1.61 against 0.355 ms at 4096^3, 22% of the tf32 roofline against 100%), where at bf16 it is within 1.2x. Its
configs were sized for 2-byte operands: at 4 bytes the 64-deep tiles of 128 x 256 and 128 x 128 need more shared
memory than an SM has, so tf32 gets the smaller ones. Here every config of the library and some sized for 4-byte
operands, each alone (no autotuning), timed through bench.timing at tf32 against torch.matmul (tf32 on).
Session 60 added B stored K-major (`layout` kn: b.t().contiguous().t(), the same matrix): Hopper's wgmma takes tf32
operands K-major only, and a row-major B is N-major.

Run from the repository root: python3 baselines/h100/s59/explore139.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "baselines", "h200", "s40"))

from _explore import begin, emit  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels.matmul import _matmul_kernel  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 11008, 4096)]
ROUNDS = 1  # session 60: one, for the device time left
LIBRARY = [(c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_warps, c.num_stages) for c in _matmul_kernel.configs]
WIDE = [(128, 128, 32, 8, 3), (128, 128, 32, 8, 4), (128, 256, 32, 8, 3), (256, 128, 32, 8, 3),
        (128, 256, 16, 8, 4), (128, 128, 16, 4, 5), (64, 256, 32, 4, 4), (256, 64, 32, 4, 4),
        (128, 128, 32, 4, 3), (64, 128, 64, 4, 3), (128, 64, 64, 4, 3)]


def kernel_for(bm, bn, bk, warps, stages):
    cfg = triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_warps=warps, num_stages=stages)
    return triton.autotune(configs=[cfg], key=["M", "N", "K", "PRECISION"])(_matmul_kernel.fn)


def main() -> None:
    out, dev = begin(sys.argv[1], False)
    cfg = TimingConfig(max_time_s=0.5)
    kernels = {c: kernel_for(*c) for c in dict.fromkeys(LIBRARY + WIDE)}
    for rnd in range(ROUNDS):
        for M, N, K in SHAPES:
            g = torch.Generator(device=dev).manual_seed(0)
            a = torch.randn(M, K, device=dev, generator=g)
            b = torch.randn(K, N, device=dev, generator=g)
            c = torch.empty(M, N, device=dev)
            torch.backends.cuda.matmul.allow_tf32 = True
            ref = a @ b
            s = time_call(lambda: torch.matmul(a, b, out=c), dev, cfg).summary()
            emit(out, kind="time", round=rnd, shape=[M, N, K], impl="cublas", median_us=round(s["median_ms"] * 1e3, 2))
            for layout, bb in (("nk", b), ("kn", b.t().contiguous().t())):
                for conf, kern in kernels.items():
                    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)

                    def call():
                        kern[grid](a, bb, c, M, N, K, a.stride(0), a.stride(1), bb.stride(0), bb.stride(1),
                                   c.stride(0), c.stride(1), PRECISION="tf32", UPCAST=False)
                    try:
                        call()
                        err = float((c - ref).norm() / ref.norm())
                        s = time_call(call, dev, cfg).summary()
                    except Exception as e:  # out of shared memory, registers
                        emit(out, kind="fail", round=rnd, shape=[M, N, K], layout=layout, config=list(conf),
                             error=str(e)[:120])
                        continue
                    emit(out, kind="time", round=rnd, shape=[M, N, K], impl="triton", layout=layout, config=list(conf),
                         library=conf in LIBRARY, median_us=round(s["median_ms"] * 1e3, 2), rel_err=err)


if __name__ == "__main__":
    main()
