"""Session 62: where the Triton GEMM's tf32 time goes since session 61 (kernels/matmul.py copies operands that are not
K-major first, `_k_major`). On an H100 the launcher read 579 us at 4096^3 where the best config alone on K-major
operands read 445 (explore139) and cuBLAS 349. Taken apart here, forward (B copied) and the backward's
dB = A^T @ dC (both copied), each through bench.timing:
- `copy_torch`: the launcher's copies (torch's copy_ of the transposed view into a padded buffer);
- `copy_triton`: the same copies by a tiled Triton transpose (`transpose` below);
- `kernel`: the library's autotuned kernel on operands copied beforehand, and the config it picked;
- `config`: each config that fits 4-byte operands alone, on the same operands;
- `library`: matmul_fwd as committed; `cublas`: torch.matmul at tf32.

Run from the repository root: python3 baselines/h200/s62/explore142.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.getcwd(), "baselines", "h200", "s40"))

from _explore import begin, emit  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import matmul as km  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 11008, 4096), (8192, 8192, 8192)]
CONFIGS = [(128, 256, 32, 8, 3), (256, 128, 32, 8, 3), (128, 256, 32, 8, 4), (256, 128, 32, 8, 4),
           (128, 256, 64, 8, 2), (128, 128, 32, 4, 4), (128, 128, 32, 8, 4), (64, 128, 32, 4, 4)]


@triton.jit
def _transpose_kernel(T, OUT, R, C, stride_tr, stride_tc, stride_o, BR: tl.constexpr, BC: tl.constexpr):
    """OUT[c, r] = T[r, c], a BR x BC tile a program."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (r[:, None] < R) & (c[None, :] < C)
    tile = tl.load(T + r[:, None].to(tl.int64) * stride_tr + c[None, :] * stride_tc, mask=mask)
    tl.store(OUT + c[None, :].to(tl.int64) * stride_o + r[:, None], tile, mask=mask)


def transpose_k_major(t: torch.Tensor, k_dim: int, br: int = 64, bc: int = 64) -> torch.Tensor:
    """What km._k_major returns, the copy made by _transpose_kernel (t's dim 1 - k_dim becomes the buffer's rows)."""
    src = t if k_dim == 0 else t.t()  # [K, other]: the buffer is its transpose
    K, n = src.shape
    buf = torch.empty(n, triton.cdiv(K, 16) * 16, dtype=t.dtype, device=t.device)[:, :K]
    grid = (triton.cdiv(K, br), triton.cdiv(n, bc))
    _transpose_kernel[grid](src, buf, K, n, src.stride(0), src.stride(1), buf.stride(0), BR=br, BC=bc)
    return buf if k_dim == 1 else buf.t()


def kernel_for(bm, bn, bk, warps, stages):
    cfg = triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_warps=warps, num_stages=stages)
    return triton.autotune(configs=[cfg], key=["M", "N", "K", "PRECISION"])(km._matmul_kernel.fn)


def launch(kern, a, b, c):
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
    kern[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
               PRECISION="tf32", UPCAST=False)
    return c


def main() -> None:
    out, dev = begin(sys.argv[1], False)
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = TimingConfig(max_time_s=0.6)
    alone = {c: kernel_for(*c) for c in CONFIGS}

    def timed(row, call, ref=None):
        try:
            got = call()
            err = None if ref is None else float((got - ref).norm() / ref.norm())
            s = time_call(call, dev, cfg).summary()
        except Exception as e:  # out of shared memory or registers
            emit(out, kind="fail", **row, error=str(e)[:160])
            return
        emit(out, kind="time", **row, median_us=round(s["median_ms"] * 1e3, 2), p20_us=round(s["p20_ms"] * 1e3, 2),
             p80_us=round(s["p80_ms"] * 1e3, 2), rel_err=err)

    for M, N, K in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        a, b, dc = (torch.randn(*s, device=dev, generator=g) for s in ((M, K), (K, N), (M, N)))
        for site, (x, y) in (("fwd", (a, b)), ("dB", (a.t(), dc))):
            if site == "dB" and M * N * K > 2 ** 38:
                continue
            base = {"shape": [M, N, K], "site": site}
            ref = x @ y
            c = torch.empty(x.shape[0], y.shape[1], device=dev)
            xk, yk = km._k_major(x, 1), km._k_major(y, 0)
            tk = (transpose_k_major(x, 1) if xk is not x else x), transpose_k_major(y, 0)
            emit(out, kind="copies", **base, x_copied=xk is not x, y_copied=yk is not y,
                 same=bool(torch.equal(tk[0], xk) and torch.equal(tk[1], yk)))
            timed({**base, "impl": "cublas"}, lambda: torch.matmul(x, y))
            timed({**base, "impl": "library"}, lambda: km.matmul_fwd(x, y, "tf32"), ref)
            timed({**base, "impl": "copy_torch"}, lambda: (km._k_major(x, 1), km._k_major(y, 0)))
            for br, bc in ((64, 64), (32, 128), (128, 32)):
                timed({**base, "impl": "copy_triton", "tile": [br, bc]},
                      lambda: (transpose_k_major(x, 1, br, bc) if xk is not x else x, transpose_k_major(y, 0, br, bc)))
            timed({**base, "impl": "kernel"}, lambda: launch(km._matmul_kernel, xk, yk, c), ref)
            picked = {str(k): str(v) for k, v in km._matmul_kernel.cache.items()}
            emit(out, kind="picked", **base, cache=picked)
            for conf, kern in alone.items():
                timed({**base, "impl": "config", "config": list(conf)}, lambda: launch(kern, xk, yk, c), ref)


if __name__ == "__main__":
    main()
