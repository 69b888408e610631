"""Session 66: where the Triton GEMM still trails cuBLAS on an H100 (session 65, baselines/h100/s65/matmul.jsonl):
at 1024^3 (bf16 forward 11.6 against 9.3 us, tf32 23.1 against 17.1), where the launcher's 128 x 128 tiles give 64
of 132 SMs a tile, and at tf32 forward 2048^3 and 4096^3 (1.26x, 1.16x), where the launcher first copies a
row-major B K-major (kernels.matmul._k_major: wgmma takes tf32 operands K-major only).

Compiled offline for sm_90a (Triton 3.9 on the CPU, `offline149.py`), explore144's descriptor kernel on a
row-major (N-major) tf32 B still makes wgmma (m64n128k8 tf32) and transposes each B tile through registers into
shared memory on the way (32 four-byte st.shared a thread a 128 x 128 x 32 step, 64 for the dB site's A^T and B;
192 registers against 157 on K-major operands, no spills, shared memory within 24 bytes of the same), so no copy
in global memory is needed; whether that is cheaper than the copy is what a GPU has to say. Every config here
fits an SM's shared memory (86-213 KB) without spilling. Here, each config alone (no autotuner) through bench.timing, against
cuBLAS and the library's launcher (`library`, autotuned, with its copy):
- `desc_persist` (explore144's kernel, one program an SM) on the operands as they come (`as_is`: no copy) and,
  for tf32, on K-major copies made beforehand (`k_major`: the kernel alone; `k_major_copies` times the copies);
- at 1024^3, bf16 tiles smaller than the launcher's (64 x 128, 128 x 64, 64 x 64: 128-256 tiles for 132 SMs), one
  program an SM and one a tile (`desc`).
The forward and the backward's dB = A^T @ dC (A stored M x K, so A^T is M-major: a tf32 A^T is transposed in
shared memory as B is).

Run from the repository root (on a GPU; `baselines/h200/s66/run149.sh` runs it):
    python3 baselines/h200/s66/explore149.py OUT.jsonl
On the CPU, every variant once against float64 (small shapes, through the interpreter):
    TRITON_INTERPRET=1 python3 baselines/h200/s66/explore149.py --smoke
Not run on a GPU yet: no machine was lent in session 66.
"""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s62"))

from explore144 import launch, start, timer  # noqa: E402

from kernels import matmul as km  # noqa: E402

POINTS = [  # (dtype, site, M, N, K)
    ("bf16", "fwd", 1024, 1024, 1024), ("bf16", "dB", 1024, 1024, 1024),
    ("tf32", "fwd", 1024, 1024, 1024), ("tf32", "dB", 1024, 1024, 1024),
    ("tf32", "fwd", 2048, 2048, 2048), ("tf32", "fwd", 4096, 4096, 4096), ("tf32", "dB", 4096, 4096, 4096),
]
CONFIGS = {  # (BM, BN, BK, warps, stages, C stored in halves)
    "bf16": [(128, 128, 64, 4, 4, True), (64, 128, 64, 4, 4, True), (128, 64, 64, 4, 4, True),
             (64, 64, 64, 4, 5, True)],
    "tf32": [(128, 128, 32, 4, 4, True), (128, 256, 32, 8, 3, True), (64, 128, 32, 4, 4, True)],
}


def variants(dtype: str, M: int):
    """(name, kernel variant, operands' layout, config) to time at a point of this dtype and size."""
    for conf in CONFIGS[dtype]:
        if dtype == "bf16" and M <= 1024:
            yield "desc", conf, "as_is"
        yield "desc_persist", conf, "as_is"
        if dtype == "tf32":
            yield "desc_persist", conf, "k_major"


def operands(dtype: str, site: str, M: int, N: int, K: int, dev: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The product's operands as the suite's calls have them: the forward's row-major A [M, K] and B [K, N], or the
    backward's A^T (A stored [K, M] here, so the product is [M, N] again) and dC [K, N]."""
    tdt = torch.float32 if dtype == "tf32" else torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    a, b = (torch.randn(*s, device=dev, generator=g).to(tdt) for s in (((M, K) if site == "fwd" else (K, M)), (K, N)))
    return (a, b) if site == "fwd" else (a.t(), b)


def smoke() -> None:
    """Every variant on each site's layouts once through the interpreter on small fp32 shapes (its dot takes fp32,
    as the library's UPCAST makes it), as they come and K-major, against float64."""
    for site in ("fwd", "dB"):
        x, y = operands("tf32", site, 96, 80, 64, "cpu")
        ref = x.double() @ y.double()
        for layout in ("as_is", "k_major"):
            xk, yk = (km._k_major(x, 1), km._k_major(y, 0)) if layout == "k_major" else (x, y)
            for variant in ("desc", "desc_persist"):
                c = launch(variant, (32, 32, 16, 4, 1, True), xk, yk, torch.empty(96, 80), "ieee", 3)
                err = float((c.double() - ref).abs().max())
                print(site, layout, variant, tuple(xk.stride()), tuple(yk.stride()), f"{err:.2e}")
                assert err < 1e-3, err


def main() -> None:
    if "--smoke" in sys.argv:
        return smoke()
    out, dev, sms, cfg = start()
    for dtype, site, M, N, K in POINTS:
        prec = "tf32" if dtype == "tf32" else "ieee"
        x, y = operands(dtype, site, M, N, K, dev)
        c = torch.empty(M, N, device=dev, dtype=x.dtype)
        k_major = (km._k_major(x, 1), km._k_major(y, 0)) if dtype == "tf32" else (x, y)
        timed = timer(out, dev, cfg, {"dtype": dtype, "site": site, "shape": [M, N, K]}, x.float() @ y.float())
        timed({"impl": "cublas"}, lambda: torch.matmul(x, y))
        timed({"impl": "library"}, lambda: km.matmul_fwd(x, y, prec))
        if dtype == "tf32":  # what `library` spends on copies before its kernel
            timed({"impl": "k_major_copies"}, lambda: (km._k_major(x, 1), km._k_major(y, 0)))
        for variant, conf, layout in variants(dtype, M):
            xs, ys = k_major if layout == "k_major" else (x, y)
            timed({"impl": variant, "layout": layout, "config": list(conf)},
                  lambda: launch(variant, conf, xs, ys, c, prec, sms))


if __name__ == "__main__":
    main()
