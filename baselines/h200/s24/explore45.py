"""Session 24: softmax forward arithmetic: one exp an element in the statistics, a reciprocal instead of a division
in the output.

Run from the repository root: python3 baselines/h200/s24/explore45.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s24/explore45.py --smoke   (CPU: checks only)

explore44's profile of the split forward at 64 x 262144 read 19 us for the statistics kernel alone (a read of
32 MiB) and 15.5 for the output kernel. The library's statistics keep a running max and sum a lane, two exps an
element; its outputs divide by the sum. Here:
- split (64 x 262144): `whole<SEG>-w<warps>` holds a program's whole segment of SEG columns (max, then the sum of
  exp(x - max): one exp an element) and writes the output multiplying by 1 / sum in 4K chunks (`-div`: dividing);
  eviction hints as explore44's `ev`, which is here too.
- one program a row (256 x 65536): explore44's `ev16384-w16-s` beside the same with the reciprocal (`rcp...`).
- a row in one tile (1024 x 16384, 4096 x 4096): `div-w<warps>` (the library's arithmetic) and `rcp-w<warps>`.
Each variant is checked against float64, then timed by bench.timing (L2 zeroed before each call), two rounds
alternating, beside the library (`base`) and a copy of the same bytes (`copy`); the split variants' kernels then
under torch.profiler.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explore44 as E44  # noqa: E402

from kernels import softmax as SM  # noqa: E402
from kernels._rows import dependent_kwargs, gdc_wait  # noqa: E402

COPY_GBPS = 4279.0
T0 = time.time()


@triton.jit
def _stats_whole(X, SEG_MAX, SEG_SUM, stride_x, n_cols, seg_len, n_segs, SEG: tl.constexpr):
    row, seg = tl.program_id(0), tl.program_id(1)
    k = tl.arange(0, SEG)
    cols = seg * seg_len + k
    x = tl.load(X + row.to(tl.int64) * stride_x + cols, mask=(k < seg_len) & (cols < n_cols), other=-float("inf"),
                eviction_policy="evict_last").to(tl.float32)
    m = tl.maximum(tl.max(x, axis=0), -3.0e38)  # a segment of only -inf: sum 0, not NaN
    tl.store(SEG_MAX + row * n_segs + seg, m)
    tl.store(SEG_SUM + row * n_segs + seg, tl.sum(tl.exp(x - m), axis=0))


@triton.jit
def _write(x_ptr, y_ptr, lo, hi, row_max, total, C: tl.constexpr, EV: tl.constexpr, RCP: tl.constexpr):
    inv = 1.0 / total
    for start in range(lo, hi, C):
        cols = start + tl.arange(0, C)
        ok = cols < hi
        x = tl.load(x_ptr + cols, mask=ok, other=-float("inf"), eviction_policy=EV).to(tl.float32)
        y = tl.exp(x - row_max) * inv if RCP else tl.exp(x - row_max) / total
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _out(X, Y, SEG_MAX, SEG_SUM, stride_x, stride_y, n_cols, seg_len, n_segs, C: tl.constexpr, SEGS: tl.constexpr,
         RCP: tl.constexpr, WAIT: tl.constexpr):
    if WAIT:
        gdc_wait()
    row, seg = tl.num_programs(0) - 1 - tl.program_id(0), tl.num_programs(1) - 1 - tl.program_id(1)
    k = tl.arange(0, SEGS)
    maxes = tl.load(SEG_MAX + row * n_segs + k, mask=k < n_segs, other=-float("inf"))
    sums = tl.load(SEG_SUM + row * n_segs + k, mask=k < n_segs, other=0.0)
    row_max, total = SM._merge_max_sum(maxes, sums)
    lo = seg * seg_len
    _write(X + row.to(tl.int64) * stride_x, Y + row.to(tl.int64) * stride_y, lo, tl.minimum(lo + seg_len, n_cols),
           row_max, total, C, "evict_first", RCP)


@triton.jit
def _row(X, Y, stride_x, stride_y, n_cols: tl.constexpr, C: tl.constexpr, SCALAR: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_max, total = E44._max_sum(X + row * stride_x, 0, n_cols, C, "evict_last", SCALAR)
    _write(X + row * stride_x, Y + row * stride_y, 0, n_cols, row_max, total, C, "evict_first", True)


@triton.jit
def _tile(X, Y, stride_x, stride_y, n_cols: tl.constexpr, BLOCK: tl.constexpr, RCP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e * (1.0 / tl.sum(e, axis=0)) if RCP else e / tl.sum(e, axis=0)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=ok)


def split(x, seg, warps, rcp):
    rows, n = x.shape
    segs = triton.cdiv(n, seg)
    y = torch.empty_like(x)
    seg_max = torch.empty(rows, segs, dtype=torch.float32, device=x.device)
    seg_sum = torch.empty_like(seg_max)
    _stats_whole[(rows, segs)](x, seg_max, seg_sum, x.stride(0), n, seg, segs, SEG=seg, num_warps=warps)
    _out[(rows, segs)](x, y, seg_max, seg_sum, x.stride(0), y.stride(0), n, seg, segs, C=min(seg, SM.SPLIT_CHUNK),
                       SEGS=triton.next_power_of_2(segs), RCP=rcp, num_warps=8, **dependent_kwargs(x.device))
    return y


def by_row(x, c, warps):
    y = torch.empty_like(x)
    _row[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], C=c, SCALAR=True, num_warps=warps)
    return y


def tile(x, warps, rcp):
    y = torch.empty_like(x)
    _tile[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                         RCP=rcp, num_warps=warps)
    return y


def cases(smoke: bool):
    dev = "cpu" if smoke else "cuda"
    shapes = ([(3, 5000), (4, 3000), (5, 700)] if smoke else [(64, 262144), (256, 65536), (1024, 16384), (4096, 4096)])
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (4 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        calls = {} if smoke else {"copy": lambda x=x, y=y: y.copy_(x)}
        calls["base"] = lambda x=x: SM.softmax_fwd(x)
        if dim > 65536 or (smoke and dim == 5000):
            segs = SM.row_segments(rows, dim, x.device)[0] if not smoke else 2
            calls["ev"] = lambda x=x, s=segs: E44.split(x, s, True)
            for seg, warps, rcp in ((16384, 16, True), (16384, 16, False), (16384, 8, True), (8192, 8, True),
                                    (4096, 4, True)):
                seg = seg if not smoke else 2048
                calls[f"whole{seg}-w{warps}{'' if rcp else '-div'}"] = (
                    lambda x=x, s=seg, w=warps, r=rcp: split(x, s, w, r))
        if dim == 65536 or (smoke and dim == 3000):
            c = 16384 if not smoke else 1024
            calls["ev16384-w16-s"] = lambda x=x, c=c: E44.by_row(x, c, 16, True, True)
            for warps in (16, 32):
                calls[f"rcp16384-w{warps}-s"] = lambda x=x, c=c, w=warps: by_row(x, c, w)
        if dim <= 16384:
            for warps in ((16, 32) if dim == 16384 else (4, 8)):
                for rcp in (False, True):
                    calls[f"{'rcp' if rcp else 'div'}-w{warps}"] = lambda x=x, w=warps, r=rcp: tile(x, w, r)
        yield rows, dim, calls, torch.softmax(x.double(), -1), 2 * rows * dim * 2


def main(path: str | None, smoke: bool):
    out = open(path, "w") if path else None
    if not smoke:
        from torch.profiler import ProfilerActivity, profile

        from bench.timing import TimingConfig, l2_flusher, time_cuda
        cfg = TimingConfig()
        flush = l2_flusher(torch.cuda.current_device())
        E44.emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
                 triton=triton.__version__)
    bad = 0
    for rows, dim, calls, ref, nbytes in cases(smoke):
        for name, fn in calls.items():
            if name != "copy":
                err = float((fn().double() - ref).abs().max() / ref.abs().max())
                bad += err > 2e-2
                E44.emit(out, kind="check", shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
        if smoke:
            continue
        for rnd in range(2):
            for name, fn in calls.items():
                us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                E44.emit(out, kind="time", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2),
                         pct=round(100 * nbytes / (us * 1e-6) / 1e9 / COPY_GBPS, 1))
        if dim > 65536:
            for name, fn in calls.items():
                if name != "copy":
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        for _ in range(20):
                            flush()
                            fn()
                        torch.cuda.synchronize()
                    kernels = {k.key[:50]: round(k.self_device_time_total / k.count, 2) for k in prof.key_averages()
                               if k.self_device_time_total > 0 and k.count >= 20 and "Fill" not in k.key}
                    E44.emit(out, kind="profile", shape=[rows, dim], variant=name, kernels_us=kernels)
    if smoke and bad:
        raise SystemExit(f"{bad} variants off float64")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else (None if smoke else "explore45.jsonl"), smoke)
