"""Session 26: layernorm's forward at rows 8K-16K wide in two passes instead of three.

The library walks such a row, one a program, in block/4-wide chunks three times as torch.compile's kernel does:
the sum, the squared deviations from the mean, the output (the second and third from L2). rmsnorm's forward
makes two passes and reads 21.2 us at 1024 x 16384 against layernorm's 23.5. Here (`welford`) the first pass
keeps a running mean and sum of squared deviations per lane (Welford: lane l's k-th value updates its mean by
delta / k, a constant since a lane's chunks are valid up to its last), the lanes are merged by Chan's formula
(two reductions over registers: the row's mean, then sum(m2_l + n_l (mean_l - mean)^2)), and the second pass
writes the output. No cancellation: the deviations are from running means, never a sum of squares minus a square.

Run from the repository root: python3 baselines/h200/s26/explore61.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s26/explore61.py --smoke   (CPU: checks only)

Smoke: against float64 at odd widths (masked lanes with fewer chunks) and at rows of mean 100, spread 1 (fp32).
GPU: against float64 (bf16 and fp32 rows), then timed by bench.timing (L2 zeroed before each call), three rounds
in alternation with the library, compile and a copy.
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


@triton.jit
def ln_fwd_welford(X, W, B, Y, stride_x, stride_y, n_cols: tl.constexpr, eps, C: tl.constexpr,
                   CHUNKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    lanes = tl.arange(0, C)
    mean = tl.zeros([C], dtype=tl.float32)  # running mean per lane
    m2 = tl.zeros([C], dtype=tl.float32)  # running sum of squared deviations per lane
    count = tl.zeros([C], dtype=tl.float32)  # values a lane has seen
    for k in tl.static_range(CHUNKS):
        cols = k * C + lanes
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        delta = tl.where(ok, x - mean, 0.0)
        mean += delta * (1.0 / (k + 1))  # a valid lane has seen k + 1 values (its chunks are valid up to its last)
        m2 += delta * (x - mean)  # zero where not ok (delta)
        count += ok.to(tl.float32)
    row_mean = tl.sum(count * mean, axis=0) / n_cols
    d = mean - row_mean
    rstd = tl.math.rsqrt(tl.sum(m2 + count * d * d, axis=0) / n_cols + eps)
    for k in tl.static_range(CHUNKS):
        cols = k * C + lanes
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(B + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = (x - row_mean) * rstd * w
        y += b
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=ok)


def welford(x, w, b, warps, chunks=4):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    ln_fwd_welford[(n_rows,)](x, w, b, y, x.stride(0), y.stride(0), n_cols, 1e-5, C=block // chunks,
                              CHUNKS=chunks, num_warps=warps)
    return y


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())
    bad = 0
    # (rows, dim, dtype, offset): odd widths leave lanes with fewer chunks; offset 100: far from zero mean
    checks = ([(3, 45, torch.float32, 0.0), (5, 10000, torch.float32, 0.0), (4, 9000, torch.float32, 100.0),
               (3, 16384, torch.bfloat16, 0.5)] if smoke else
              [(64, 10000, torch.float32, 0.0), (64, 16384, torch.float32, 100.0), (1024, 16384, torch.bfloat16, 0.5),
               (64, 12289, torch.bfloat16, 0.5)])
    for rows, dim, dtype, offset in checks:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + offset).to(dtype)
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).to(dtype)
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).to(dtype)
        ref = torch.nn.functional.layer_norm(x.double(), (dim,), w.double(), b.double(), 1e-5)
        for name, fn in (("lib", lambda: LN.layernorm_fwd(x, w, b, stats=False)[0]),
                         ("welford w4", lambda: welford(x, w, b, 4)), ("welford w16", lambda: welford(x, w, b, 16))):
            err = float((fn().double() - ref).abs().max() / ref.abs().max())
            tol = 1e-5 if dtype == torch.float32 else 2e-2
            bad += err > tol
            emit(out, kind="check", shape=[rows, dim], dtype=str(dtype), offset=offset, variant=name, err=err,
                 ok=err <= tol)
    if not smoke:
        from impls.layernorm import compiled
        for rows, dim in ((1024, 16384), (4096, 16384), (16384, 16384), (65536, 16384), (4096, 12288)):
            g = torch.Generator(device=dev).manual_seed(0)
            x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
            w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
            b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
            y = torch.empty_like(x)
            comp = compiled({"tokens": rows, "dim": dim}, torch.bfloat16, "cuda")
            calls = {"lib": lambda: LN.layernorm_fwd(x, w, b, stats=False)[0], "compile": lambda: comp(x, w, b),
                     "copy": lambda: y.copy_(x)}
            for warps in (8, 16, 32):
                calls[f"welford w{warps}"] = lambda warps=warps: welford(x, w, b, warps)
            with torch.no_grad():
                for rnd in range(3):
                    for name, fn in calls.items():
                        us = timer(fn) * 1e3
                        emit(out, kind="time", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
            c = LN._layernorm_fwd_kernel.best_config
            emit(out, kind="config", shape=[rows, dim], lib=f"warps={c.num_warps} {c.kwargs}")
        d = torch.cuda.current_device()
        for key, ck in ln_fwd_welford.device_caches[d][0].items():
            emit(out, kind="regs", n_regs=ck.n_regs, n_spills=ck.n_spills, warps=ck.metadata.num_warps,
                 key=str(key)[-160:])
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
