"""attention: softmax(Q K^T / sqrt(d) [+ causal mask]) V for q, k, v [batch, heads, seq, head_dim].

Forward 4*B*H*S^2*D FLOPs (half when causal) on the matrix units over Q, K, V, O; backward 2.5x that. The naive
implementation materialises the S x S scores and is the first to run out of memory.
"""
from __future__ import annotations

import functools
import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F

from bench.dtypes import itemsize
from bench.profiling import named
from bench.registry import Cost, component
from impls._compile import compile_fresh


def make_inputs(point, dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (point["batch"], point["heads"], point["seq"], point["head_dim"])
    q, k, v = (torch.randn(shape, generator=gen, device=device).to(dtype) for _ in range(3))  # [B, H, S, D] each
    return {"q": q, "k": k, "v": v, "causal": point["causal"]}


def cost(point, dtype, mode):
    b, h, s, d = point["batch"], point["heads"], point["seq"], point["head_dim"]
    size = itemsize(dtype)
    fwd_flops = 4 * b * h * s * s * d * (0.5 if point["causal"] else 1.0)
    bhsd = b * h * s * d
    lse = b * h * s * 4  # the fp32 logsumexp a fused forward saves for its backward
    if mode == "fwd":  # read Q, K, V; write O
        return Cost(fwd_flops, 4 * bhsd * size, "tensor")
    if mode == "bwd":  # read Q, K, V, O, dO, lse; write dQ, dK, dV
        return Cost(2.5 * fwd_flops, 8 * bhsd * size + lse, "tensor")
    return Cost(3.5 * fwd_flops, 8 * bhsd * size + 2 * lse, "tensor")  # read Q, K, V, dO; write O, dQ, dK, dV


def reference_scores(q, k, causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[-2]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return scores


def reference(q, k, v, causal):
    return torch.softmax(reference_scores(q, k, causal), dim=-1) @ v


def reference_bytes(point, mode):
    """The float64 reference holds S x S scores, masked scores and probabilities (and their gradients)."""
    b, h, s, d = point["batch"], point["heads"], point["seq"], point["head_dim"]
    return 8 * b * h * (s * s * (3 if mode == "fwd" else 8) + 8 * s * d)


def grad_scale(name, inputs, grad_outs):
    """dQ = dS K / sqrt(d) with dS = P * (dP - rowsum(P * dP)), dP = dO V^T: the terms that cancel are P * dP,
    so dQ's error is judged against ||(P * dP) K|| / sqrt(d) (and dK's against ||(P * dP)^T Q|| / sqrt(d)).
    With one key (seq 1) dQ and dK are exactly zero while these terms are not."""
    if name not in ("q", "k"):
        return None
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(reference_scores(q, k, inputs["causal"]), dim=-1)  # [B, H, S, S]
    terms = p * (grad_outs[0] @ v.transpose(-2, -1))  # P * dP
    other = k if name == "q" else q
    mat = terms if name == "q" else terms.transpose(-2, -1)
    return float(torch.linalg.vector_norm(mat @ other)) * scale


attention = component(
    "attention",
    description="scaled dot-product attention, optionally causal",
    axes={"batch": int, "heads": int, "seq": int, "head_dim": int, "causal": bool},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    tolerance={"fp64": 1e-10, "fp32": 1e-5, "tf32": 5e-3, "bf16": 1e-2, "fp16": 5e-3},
    grad_tolerance={"fp64": 1e-10, "fp32": 2e-5, "tf32": 1e-2, "bf16": 2e-2, "fp16": 1e-2},
    grad_scale=grad_scale,
    modes=("fwd", "bwd", "fwd_bwd"),
    dtypes=("fp32", "bf16", "fp16"),
    grad_inputs=("q", "k", "v"),
    baseline="naive",
    row_sliced=("q", "k", "v"),  # batch (dim 0) and heads (dim 1) are independent
    row_local_grads=("q", "k", "v"),
    slice_dims=2,
    reference_bytes=reference_bytes,
)


def attention_naive(q, k, v, causal, ranges: bool = True):
    """The formula, step by step; with `ranges` each step runs in its own NVTX range (torch.compile traces it
    with ranges=False: the range calls would break its graph)."""
    phase = named if ranges else (lambda name: nullcontext())
    with phase("scores"):
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # [B, H, S, S]
        if causal:
            s = q.shape[-2]
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    with phase("softmax"):
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # [B, H, S, S]
    with phase("weighted_sum"):
        return probs @ v  # [B, H, S, D]


@attention.impl("naive", description="scores, masked softmax, weighted sum; materialises S x S")
def naive(q, k, v, causal):
    return attention_naive(q, k, v, causal)


@attention.impl("sdpa", description="F.scaled_dot_product_attention (backend recorded in the row)", factory=True)
def sdpa(point, dtype, device):
    fn = lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    fn.row_info = {"sdpa_backend": _sdpa_backend(point, dtype, device)}
    return fn


def _sdpa_backend(point, dtype, device) -> str:
    """The first backend PyTorch would pick that runs this point (tried in its own priority order)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device != "cuda":
        return "math (CPU)"
    shape = (1, point["heads"], min(point["seq"], 128), point["head_dim"])
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    q = torch.randn(shape, device=device, dtype=dt)
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.MATH):
        try:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, q, q, is_causal=point["causal"])
            return backend.name.lower()
        except RuntimeError:
            continue
    return "unknown"


@attention.impl("compile", description="torch.compile of the naive formula", factory=True)
def compiled(point, dtype, device):
    return compile_fresh(functools.partial(attention_naive, ranges=False))


@attention.impl("triton", description="FlashAttention-2 in Triton: online-softmax forward saving the logsumexp, "
                "backward recomputing P (dK/dV and dQ kernels), autotuned tiles and load paths (pointers or TMA "
                "descriptors)", triton=True, factory=True)
def triton_flash(point, dtype, device):
    from kernels.attention import flash_attention, tma_status

    def fn(q, k, v, causal):
        return flash_attention(q, k, v, causal)

    fn.row_info = {"tma": tma_status(torch.device(device))}  # whether descriptor loads could be chosen, or why not
    return fn
