"""rmsnorm: y = x / sqrt(mean(x^2) + eps) * w over the last dim of x [tokens, dim].

Memory-bound: about 4 FLOPs an element over 2 elements moved, so its roofline is the copy bandwidth.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.dtypes import itemsize
from bench.registry import Cost, component
from impls._compile import compile_fresh

EPS = 1e-6


def make_inputs(point, dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    t, d = point["tokens"], point["dim"]
    x = torch.randn(t, d, generator=gen, device=device, dtype=torch.float32).to(dtype)  # [tokens, dim]
    w = (1 + 0.1 * torch.randn(d, generator=gen, device=device, dtype=torch.float32)).to(dtype)  # [dim]
    return {"x": x, "w": w}


def cost(point, dtype, mode):
    t, d = point["tokens"], point["dim"]
    size = itemsize(dtype)
    td = t * d
    fwd = Cost(4 * td, (2 * td + d) * size)  # read x, w; write y
    # bwd: g = dy*w, sum(g*x), dx = r*(g - x*r^2*c), dw += dy*x*r: ~9 FLOPs an element;
    # read x, w, dy; write dx, dw (the per-program dw partials are not counted: minimal bytes)
    bwd = Cost(9 * td, (3 * td + 2 * d) * size)
    if mode == "fwd":
        return fwd
    if mode == "bwd":
        return bwd
    # fwd_bwd: read x, w, dy once; write y, dx, dw once
    return Cost(13 * td, (4 * td + 2 * d) * size)


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def grad_scale(name, inputs, grad_outs):
    """dx = rstd * (g - x * rstd^2 * mean(g * x)) with g = dy * w: its terms are about ||g * rstd||."""
    if name != "x":
        return None
    x, w = inputs["x"], inputs["w"]
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    return float(torch.linalg.vector_norm(grad_outs[0] * w * rstd))


rmsnorm = component(
    "rmsnorm",
    description="RMSNorm over the last dim (Llama-style, fp32 statistics)",
    axes={"tokens": int, "dim": int},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3},
    grad_tolerance={"fp64": 1e-12, "fp32": 1e-5, "bf16": 2e-2, "fp16": 4e-3},
    grad_scale=grad_scale,
    modes=("fwd", "bwd", "fwd_bwd"),
    dtypes=("fp32", "bf16", "fp16"),
    grad_inputs=("x", "w"),
    baseline="eager",
    row_sliced=("x",),
    row_local_grads=("x",),
)


def rmsnorm_eager(x, w):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return (y * w.float()).to(x.dtype)


@rmsnorm.impl("eager", description="the eager formula, fp32 statistics (one kernel per op: 9 in bf16 on an H200)")
def eager(x, w):
    return rmsnorm_eager(x, w)


@rmsnorm.impl("builtin", description="torch.nn.functional.rms_norm")
def builtin(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


@rmsnorm.impl("compile", description="torch.compile of the eager formula", factory=True)
def compiled(point, dtype, device):
    return compile_fresh(rmsnorm_eager)


@rmsnorm.impl("triton", description="Triton kernels, fwd + bwd (dw via per-program partials)", triton=True,
              writes_out=True)
def triton_rmsnorm(x, w, out=None):
    from kernels.rmsnorm import rmsnorm as triton_rms

    return triton_rms(x, w, EPS, out)
