"""matmul: C = A @ B for A [m, k] and B [k, n].

The compute-bound anchor of the roofline: 2*m*n*k FLOPs on the matrix units over (mk + kn + mn) elements.
"""
from __future__ import annotations

import torch

from bench.dtypes import itemsize
from bench.registry import Cost, component


def make_inputs(point, dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    m, n, k = point["m"], point["n"], point["k"]
    a = torch.randn(m, k, generator=gen, device=device, dtype=torch.float32).to(dtype)  # [m, k]
    b = torch.randn(k, n, generator=gen, device=device, dtype=torch.float32).to(dtype)  # [k, n]
    return {"a": a, "b": b}


def cost(point, dtype, mode):
    m, n, k = point["m"], point["n"], point["k"]
    size = itemsize(dtype)
    a, b, c = m * k, k * n, m * n
    if mode == "fwd":
        return Cost(2 * m * n * k, (a + b + c) * size, "tensor")
    if mode == "bwd":  # read A, B, dC; write dA, dB
        return Cost(4 * m * n * k, (a + b + c + a + b) * size, "tensor")
    # fwd_bwd: read A, B, dC; write C, dA, dB
    return Cost(6 * m * n * k, (a + b + c + c + a + b) * size, "tensor")


def reference(a, b):
    return a @ b


matmul = component(
    "matmul",
    description="C = A @ B (dense GEMM)",
    axes={"m": int, "n": int, "k": int},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    # fp32 products run exact (ieee) in every impl; tf32 and bf16 round their operands.
    tolerance={"fp64": 1e-10, "fp32": 1e-5, "tf32": 5e-3, "bf16": 1e-2, "fp16": 5e-3},
    modes=("fwd", "bwd", "fwd_bwd"),
    dtypes=("fp32", "tf32", "bf16", "fp16"),
    grad_inputs=("a", "b"),
    baseline="eager",
    row_sliced=("a",),
    row_local_grads=("a",),
)


@matmul.impl("eager", description="torch.matmul (cuBLAS / MKL)", writes_out=True)
def eager(a, b, out=None):
    return torch.matmul(a, b, out=out) if out is not None else torch.matmul(a, b)


@matmul.impl("triton", description="Triton tiled GEMM, autotuned, grouped tile order", triton=True,
             factory=True, writes_out=True, dtypes=("fp32", "tf32", "bf16", "fp16"))
def triton_matmul(point, dtype, device):
    from kernels.matmul import matmul as triton_mm

    prec = "tf32" if dtype == "tf32" else "ieee"
    return lambda a, b, out=None: triton_mm(a, b, prec, out)
