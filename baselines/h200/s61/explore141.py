"""Session 61, after explore140: the library's GEMM launcher as committed (at tf32 on Hopper its operands copied into
K-major buffers with rows 16 elements aligned; two 32-deep configs added for 4-byte operands) against the kernel
before (the old configs, on the operands as they come), torch.matmul beside them, at the matmul suite's points: the
forward and the backward's dB = A^T @ dC, tf32 and bf16 (whose operands are never copied: the added configs only).

Run from the repository root: python3 baselines/h200/s61/explore141.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.getcwd(), "baselines", "h200", "s40"))
sys.path.insert(0, os.path.join(os.getcwd(), "baselines", "h200", "s61"))

from _explore import begin, emit  # noqa: E402
from explore140 import SHAPES, as_is  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import matmul as km  # noqa: E402

OLD = [c for c in km._matmul_kernel.configs if not (c.kwargs["BK"] == 32 and c.num_warps == 8)]


def old():
    return triton.autotune(configs=OLD, key=["M", "N", "K", "PRECISION"])(km._matmul_kernel.fn)


def main() -> None:
    out, dev = begin(sys.argv[1], False)
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = TimingConfig(max_time_s=1.0)
    for dtype in ("tf32", "bf16"):
        prec, tdt = ("tf32", torch.float32) if dtype == "tf32" else ("ieee", torch.bfloat16)
        for M, N, K in SHAPES:
            g = torch.Generator(device=dev).manual_seed(0)
            a, b, dc = (torch.randn(*s, device=dev, generator=g).to(tdt) for s in ((M, K), (K, N), (M, N)))
            c_fwd, c_db = torch.empty(M, N, device=dev, dtype=tdt), torch.empty(K, N, device=dev, dtype=tdt)
            calls = {
                ("fwd", "cublas"): (lambda: torch.matmul(a, b), None),
                ("fwd", "old"): (lambda k=old(): as_is(k, a, b, c_fwd, prec), a @ b),
                ("fwd", "library"): (lambda: km.matmul_fwd(a, b, prec), a @ b),
                ("dB", "cublas"): (lambda: torch.matmul(a.t(), dc), None),
                ("dB", "old"): (lambda k=old(): as_is(k, a.t(), dc, c_db, prec), a.t() @ dc),
                ("dB", "library"): (lambda: km.matmul_fwd(a.t(), dc, prec), a.t() @ dc),
            }
            for (site, impl), (call, ref) in calls.items():
                got = call()
                err = None if ref is None else float((got.float() - ref.float()).norm() / ref.float().norm())
                s = time_call(call, dev, cfg).summary()
                emit(out, kind="time", dtype=dtype, shape=[M, N, K], site=site, impl=impl,
                     median_us=round(s["median_ms"] * 1e3, 2), p20_us=round(s["p20_ms"] * 1e3, 2),
                     p80_us=round(s["p80_ms"] * 1e3, 2), rel_err=err)


if __name__ == "__main__":
    main()
