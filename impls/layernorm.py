"""layernorm: y = (x - mean) / sqrt(var + eps) * w + b over the last dim of x [tokens, dim].

Memory-bound like rmsnorm, with a bias and a centred variance: about 8 FLOPs an element over 2 moved.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.dtypes import itemsize
from bench.registry import Cost, component
from impls._compile import compile_fresh

EPS = 1e-5


def make_inputs(point, dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    t, d = point["tokens"], point["dim"]
    x = (torch.randn(t, d, generator=gen, device=device) + 0.5).to(dtype)  # [tokens, dim], not zero-mean
    w = (1 + 0.1 * torch.randn(d, generator=gen, device=device)).to(dtype)  # [dim]
    b = (0.1 * torch.randn(d, generator=gen, device=device)).to(dtype)  # [dim]
    return {"x": x, "w": w, "b": b}


def cost(point, dtype, mode):
    t, d = point["tokens"], point["dim"]
    size = itemsize(dtype)
    td = t * d
    if mode == "fwd":  # read x, w, b; write y
        return Cost(8 * td, (2 * td + 2 * d) * size)
    if mode == "bwd":  # read x, w, dy; write dx, dw, db (saved mean/rstd not counted: minimal bytes)
        return Cost(11 * td, (3 * td + 3 * d) * size)
    return Cost(19 * td, (4 * td + 4 * d) * size)  # read x, w, b, dy; write y, dx, dw, db


def reference(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + EPS) * w + b


def grad_scale(name, inputs, grad_outs):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)): its terms are about ||g * rstd||. dw = sum(dy * xhat)
    with |xhat| ~ 1: about ||dy|| (a row of one element has xhat = 0, so dw = 0 exactly)."""
    if name == "w":
        return float(torch.linalg.vector_norm(grad_outs[0]))
    if name != "x":
        return None
    x, w = inputs["x"], inputs["w"]
    rstd = torch.rsqrt((x - x.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True) + EPS)
    return float(torch.linalg.vector_norm(grad_outs[0] * w * rstd))


layernorm = component(
    "layernorm",
    description="LayerNorm over the last dim with weight and bias (fp32 statistics)",
    axes={"tokens": int, "dim": int},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3},
    grad_tolerance={"fp64": 1e-12, "fp32": 2e-5, "bf16": 2e-2, "fp16": 4e-3},
    grad_scale=grad_scale,
    modes=("fwd", "bwd", "fwd_bwd"),
    dtypes=("fp32", "bf16", "fp16"),
    grad_inputs=("x", "w", "b"),
    baseline="eager",
    row_sliced=("x",),
    row_local_grads=("x",),
)


def layernorm_eager(x, w, b):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = (xf - mean).pow(2).mean(-1, keepdim=True)
    return ((xf - mean) * torch.rsqrt(var + EPS) * w.float() + b.float()).to(x.dtype)


@layernorm.impl("eager", description="the eager formula, fp32 statistics")
def eager(x, w, b):
    return layernorm_eager(x, w, b)


@layernorm.impl("builtin", description="torch.nn.functional.layer_norm")
def builtin(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, EPS)


@layernorm.impl("compile", description="torch.compile of the eager formula", factory=True)
def compiled(point, dtype, device):
    return compile_fresh(layernorm_eager)


@layernorm.impl("triton", description="Triton kernels, fwd + bwd (dw, db via per-program partials)", triton=True,
                writes_out=True)
def triton_layernorm(x, w, b, out=None):
    from kernels.layernorm import layernorm as triton_ln

    return triton_ln(x, w, b, EPS, out)
