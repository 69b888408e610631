"""softmax: y = exp(x - max) / sum(exp(x - max)) along the last dim of x [rows, dim].

Memory-bound: one read and one write an element forward; backward reads y and dy and writes dx.
"""
from __future__ import annotations

import torch

from bench.dtypes import itemsize
from bench.registry import Cost, component
from impls._compile import compile_fresh


def make_inputs(point, dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (3 * torch.randn(point["rows"], point["dim"], generator=gen, device=device)).to(dtype)  # [rows, dim]
    return {"x": x}


def cost(point, dtype, mode):
    td = point["rows"] * point["dim"]
    size = itemsize(dtype)
    if mode == "fwd":  # read x; write y
        return Cost(5 * td, 2 * td * size)
    if mode == "bwd":  # read y, dy; write dx
        return Cost(4 * td, 3 * td * size)
    return Cost(9 * td, 4 * td * size)  # read x, dy; write y, dx


def reference(x):
    return torch.softmax(x, dim=-1)


def grad_scale(name, inputs, grad_outs):
    """dx = y * (dy - sum(dy * y)): its terms are about ||y * dy|| (a row of one element has dx = 0 exactly)."""
    y = torch.softmax(inputs["x"], dim=-1)
    return float(torch.linalg.vector_norm(y * grad_outs[0]))


softmax = component(
    "softmax",
    description="row-wise softmax over the last dim",
    axes={"rows": int, "dim": int},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    # fp32 3e-5: in 2 of 3 clean-clone .ci/run runs (2026-11-30, CPU) the plain eager formula at 37 x 123 read 1.44e-5
    # (the same value both times; 7.9e-8 when run alone, 3,000 times): about 1e-5 off at every element, cause not
    # found. A wrong kernel is off by far more than either tolerance.
    tolerance={"fp64": 1e-12, "fp32": 3e-5, "bf16": 1e-2, "fp16": 2e-3},
    grad_tolerance={"fp64": 1e-12, "fp32": 2e-5, "bf16": 2e-2, "fp16": 4e-3},
    grad_scale=grad_scale,
    modes=("fwd", "bwd", "fwd_bwd"),
    dtypes=("fp32", "bf16", "fp16"),
    grad_inputs=("x",),
    baseline="eager",
    row_sliced=("x",),
    row_local_grads=("x",),
)


def softmax_eager(x):
    xf = x.float()
    e = torch.exp(xf - xf.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


@softmax.impl("eager", description="the eager formula: max, exp, sum, divide (fp32)")
def eager(x):
    return softmax_eager(x)


@softmax.impl("builtin", description="torch.softmax")
def builtin(x):
    return torch.softmax(x, dim=-1)


@softmax.impl("compile", description="torch.compile of the eager formula", factory=True)
def compiled(point, dtype, device):
    return compile_fresh(softmax_eager)


@softmax.impl("triton", description="Triton kernels: one-block rows in registers, long rows with online max",
              triton=True, writes_out=True)
def triton_softmax(x, out=None):
    from kernels.softmax import softmax as triton_sm

    return triton_sm(x, out)
