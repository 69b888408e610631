"""Session 32: layernorm forward variants that make one reduction (or one pass over x) fewer, against the
library's and torch.compile's.

At 16K-wide rows the library walks each row three times, as torch.compile's kernel does (sum, squared
deviations, output; the last two from L2); rmsnorm's forward walks it twice and is 2-10% faster at the same
shapes (norms.jsonl, session 31: 992.7 against 1,019.9 us at 65536 x 16384, 21.3 against 23.6 at 1024 x 16384).
`two_pass` takes the mean and variance in one pass: each lane keeps its first element as a shift and sums the
deviations from it and their squares, so a lane's (count, mean, M2) comes without cancellation beyond its own
spread; the lanes merge in one reduction (Chan et al.). Rows held in registers (768 and 4096 wide) take two
dependent block reductions (mean, then squared deviations); `groups` takes the (count, mean, M2) of each
8-element group within its thread and merges them in one (as softmax's _softmax_fwd_row merges its groups).
Each variant is checked against float64, then all are timed by bench.timing in alternation, three rounds.

Run from the repository root: python3 baselines/h200/s32/explore86.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s32/explore86.py --smoke   (CPU)
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

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from impls._compile import compile_fresh  # noqa: E402
from impls.layernorm import EPS, layernorm_eager  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import row_block  # noqa: E402


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Two (count, mean, sum of squared deviations) merged; a count of 0 adds nothing."""
    n = n_a + n_b
    frac = n_b / tl.maximum(n, 1.0)
    delta = mean_b - mean_a
    return n, mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac


@triton.jit
def _two_pass(X, W, B, Y, stride_x, stride_y, n_cols: tl.constexpr, eps, C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    lanes = tl.arange(0, C)
    shift = tl.load(x_row + lanes, mask=lanes < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    s1 = tl.zeros([C], dtype=tl.float32)
    s2 = tl.zeros([C], dtype=tl.float32)
    for start in range(C, n_cols, C):
        cols = start + lanes
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
        d = tl.where(cols < n_cols, x - shift, 0.0)
        s1 += d
        s2 += d * d
    cnt = tl.maximum((n_cols - lanes + C - 1) // C, 0).to(tl.float32)  # elements of the row this lane saw
    lane_mean = shift + s1 / tl.maximum(cnt, 1.0)
    lane_m2 = s2 - s1 * s1 / tl.maximum(cnt, 1.0)
    _, mean, m2 = tl.reduce((cnt, lane_mean, lane_m2), 0, _chan)
    rstd = tl.math.rsqrt(m2 / n_cols + eps)
    for start in range(0, n_cols, C):
        cols = start + lanes
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(B + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = (x - mean) * rstd * w
        y += b
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=ok)


@triton.jit
def _groups(X, W, B, Y, stride_x, stride_y, n_rows, n_cols: tl.constexpr, eps, BLOCK: tl.constexpr,
            ROWS: tl.constexpr, G: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK // G)[:, None] * G + tl.arange(0, G)[None, :]  # [groups, G]
    r3 = rows[:, None, None]
    c3 = cols[None, :, :]
    mask = (r3 < n_rows) & (c3 < n_cols)
    x = tl.load(X + r3.to(tl.int64) * stride_x + c3, mask=mask, other=0.0).to(tl.float32)  # [ROWS, groups, G]
    cnt = tl.sum(mask.to(tl.float32), axis=2)
    g_mean = tl.sum(x, axis=2) / tl.maximum(cnt, 1.0)
    d = tl.where(mask, x - g_mean[:, :, None], 0.0)
    _, mean, m2 = tl.reduce((cnt, g_mean, tl.sum(d * d, axis=2)), 1, _chan)  # [ROWS]
    rstd = tl.math.rsqrt(m2 / n_cols + eps)
    w = tl.load(W + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(B + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = (x - mean[:, None, None]) * rstd[:, None, None] * w[None, :, :] + b[None, :, :]
    tl.store(Y + r3.to(tl.int64) * stride_y + c3, y.to(Y.dtype.element_ty), mask=mask)


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def variants(x, w, b, y, both=False):
    rows, dim = x.shape
    block, single = row_block(dim)
    calls = {"library": lambda: LN.layernorm_fwd(x, w, b, EPS, out=y, stats=False)}
    calls["library"]()
    pick = LN._layernorm_fwd_kernel.best_config
    if block >= 16384 or not single or both:
        for warps in (8, 16):
            calls[f"two_pass w{warps}"] = lambda warps=warps: _two_pass[(rows,)](
                x, w, b, y, x.stride(0), y.stride(0), dim, EPS, C=block // 4, num_warps=warps)
    if block < 16384 and single:
        r, warps = pick.kwargs["ROWS"], pick.num_warps
        calls[f"groups R{r} w{warps}"] = lambda: _groups[(triton.cdiv(rows, r),)](
            x, w, b, y, x.stride(0), y.stride(0), rows, dim, EPS, BLOCK=block, ROWS=r, G=8, num_warps=warps)
    return calls, str(pick)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
    shapes = ([(3, 100), (5, 64), (4, 333), (2, 1000)] if smoke else
              [(16384, 768), (65536, 768), (1024, 4096), (4096, 4096), (16384, 4096), (65536, 4096),
               (1024, 16384), (4096, 16384), (16384, 16384), (65536, 16384)])
    if not smoke:
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        xd = x.double()
        mean = xd.mean(-1, keepdim=True)
        ref = (xd - mean) * torch.rsqrt((xd - mean).pow(2).mean(-1, keepdim=True) + EPS) * w.double() + b.double()
        calls, pick = variants(x, w, b, y, both=smoke)
        if not smoke:
            compiled = compile_fresh(layernorm_eager)
            calls["compile"] = lambda: compiled(x, w, b)
        for name, fn in calls.items():
            y.zero_()
            r = fn()
            got = r if name == "compile" else y
            emit(out, kind="check", shape=[rows, dim], call=name, pick=pick,
                 rel_err=float((got.double() - ref).norm() / ref.norm()))
        # offset rows: the shift keeps the variance exact where a plain sum of squares would cancel
        xo = (x.float() + 1000.0).bfloat16()
        xod = xo.double()
        mo = xod.mean(-1, keepdim=True)
        ro = (xod - mo) * torch.rsqrt((xod - mo).pow(2).mean(-1, keepdim=True) + EPS) * w.double() + b.double()
        x.copy_(xo)
        for name, fn in calls.items():
            if name == "compile":
                continue
            y.zero_()
            fn()
            emit(out, kind="check_offset", shape=[rows, dim], call=name, rel_err=float((y.double() - ro).norm() / ro.norm()))
        x.copy_(xd.bfloat16())
        if smoke:
            continue
        for rnd in range(3):
            for name, fn in calls.items():
                t = time_call(fn, dev, TimingConfig())
                s = t.summary()
                emit(out, kind="time", round=rnd, shape=[rows, dim], call=name, median_us=round(s["median_ms"] * 1e3, 3),
                     n=s["n"], method=t.method)
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
