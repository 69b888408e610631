"""Session 30: softmax and layernorm forwards over rows held in registers with one block reduction a row.

The library's tile kernels reduce a row twice across the block: softmax its max, then its sum of exp(x - max);
layernorm its sum, then its squared deviations. Each cross-warp reduction is a shared-memory round trip and a
barrier, and at 16K-wide rows (one program an SM, 16 or 32 warps) nothing else on the SM hides them. Here each
thread first reduces its own groups of G contiguous elements (no communication), then one block reduction merges
the groups' pairs (softmax: max and sum of exp, merged by rescaling) or triples (layernorm: count, mean and
squared deviations, merged as Chan et al.), so a row takes one round trip. Softmax still takes one exp an element
(y = e * exp(group max - row max) / sum, a multiply), plus one a group.

Timed by bench.timing (L2 zeroed before each call), one row a program at fixed warps, against the library's
forwards (autotuned), the rmsnorm forward and a copy of the same bytes, three rounds in alternation, at
4096 x 4096 and 1024 x 16384 bf16 (and 2048 x 8192). Each variant's error against float64 is recorded.

Run from the repository root: python3 baselines/h200/s30/explore80.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s30/explore80.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402


@triton.jit
def _max_sum(m1, s1, m2, s2):
    m = tl.maximum(m1, m2)
    return m, s1 * tl.exp(m1 - m) + s2 * tl.exp(m2 - m)


@triton.jit
def _chan(n1, mu1, q1, n2, mu2, q2):
    n = n1 + n2
    f = tl.where(n > 0, n2 / tl.maximum(n, 1.0), 0.0)
    d = mu2 - mu1
    return n, mu1 + d * f, q1 + q2 + d * d * n1 * f


@triton.jit
def softmax_one(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr, G: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    NG: tl.constexpr = BLOCK // G
    offs = tl.arange(0, NG)[:, None] * G + tl.arange(0, G)[None, :]
    mask = offs < n_cols
    x = tl.load(X + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    mg = tl.maximum(tl.max(x, axis=1), -3.0e38)  # [NG]; groups past the end: finite, sum 0
    e = tl.exp(x - mg[:, None])
    sg = tl.sum(e, axis=1)
    m, s = tl.reduce((mg, sg), 0, _max_sum)
    scale = tl.exp(mg - m) * (1.0 / s)
    tl.store(Y + row * stride_y + offs, (e * scale[:, None]).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_one(X, W, B, Y, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr, G: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    NG: tl.constexpr = BLOCK // G
    offs = tl.arange(0, NG)[:, None] * G + tl.arange(0, G)[None, :]
    mask = offs < n_cols
    x = tl.load(X + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    ng = tl.minimum(tl.maximum(n_cols - tl.arange(0, NG) * G, 0), G).to(tl.float32)
    mu = tl.sum(x, axis=1) / tl.maximum(ng, 1.0)
    d = tl.where(mask, x - mu[:, None], 0.0)
    _, mean, m2 = tl.reduce((ng, mu, tl.sum(d * d, axis=1)), 0, _chan)
    rstd = tl.math.rsqrt(m2 / n_cols + eps)
    w = tl.load(W + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(Y + row * stride_y + offs, y.to(Y.dtype.element_ty), mask=mask)


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def rel_err(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    shapes = [(3, 37), (5, 5000)] if smoke else [(4096, 4096), (1024, 16384), (2048, 8192)]
    warps = [4] if smoke else [4, 8, 16, 32]
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
    g = torch.Generator(device=dev).manual_seed(0)
    for rows, dim in shapes:
        x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        block = triton.next_power_of_2(dim)
        sm_ref = torch.softmax(x.double(), -1)
        ln_ref = torch.nn.functional.layer_norm(x.double(), (dim,), w.double(), b.double(), 1e-5)
        calls = {"copy": (lambda: y.copy_(x), None),
                 "lib softmax": (lambda: SM.softmax_fwd(x, out=y), sm_ref),
                 "lib layernorm": (lambda: LN.layernorm_fwd(x, w, b, out=y, stats=False), ln_ref),
                 "lib rmsnorm": (lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False), None)}
        for nw in warps:
            if not smoke and not 8 <= block // (32 * nw) <= 64:
                continue
            for G in (8, 16):
                calls[f"softmax one w{nw} G{G}"] = (
                    lambda nw=nw, G=G: softmax_one[(rows,)](x, y, x.stride(0), y.stride(0), dim, BLOCK=block, G=G,
                                                            num_warps=nw), sm_ref)
                calls[f"layernorm one w{nw} G{G}"] = (
                    lambda nw=nw, G=G: layernorm_one[(rows,)](x, w, b, y, x.stride(0), y.stride(0), dim, 1e-5,
                                                              BLOCK=block, G=G, num_warps=nw), ln_ref)
        for name, (fn, ref) in calls.items():  # compile, autotune and check each once
            fn()
            if ref is not None:
                emit(out, kind="check", shape=f"{rows}x{dim}", call=name, rel_err=rel_err(y, ref))
        if smoke:
            continue
        for rnd in range(3):
            for name, (fn, _) in calls.items():
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", round=rnd, shape=f"{rows}x{dim}", call=name, us=round(us, 2))
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
