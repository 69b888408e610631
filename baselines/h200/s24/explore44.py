"""Session 24: softmax forward with few long rows, the second read of x steered into L2 by eviction hints.

Run from the repository root: python3 baselines/h200/s24/explore44.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s24/explore44.py --smoke   (CPU: checks only)

The library's long-row softmax reads x once for each row's (or segment's) max and sum and again for the output,
with no eviction hints. Here the first read is marked evict_last and the second evict_first (as the norm
forwards' row passes do, worth 3% there):
- 64 x 262144 (split: (row, segment) programs, two kernels, the second a dependent launch): `ev` with the
  library's segments, `ev-seg<S>` with S segments a row.
- 256 x 65536 (one program a row, two passes over 16K chunks): `ev<C>-w<warps>[-s]`, chunks of C, running
  statistics a lane (or, -s, one scalar pair).
`none<...>` are the same kernels without hints, so the hints alone are compared. Each variant is checked against
float64, then timed by bench.timing (L2 zeroed before each call), two rounds alternating, beside the library's
call (`base`) and a copy of the same bytes (`copy`). Last, each base call's kernels under torch.profiler.
"""
from __future__ import annotations

import json
import sys
import time

import torch
import triton
import triton.language as tl

from kernels import softmax as SM
from kernels._rows import dependent_kwargs, gdc_wait

COPY_GBPS = 4279.0
T0 = time.time()


@triton.jit
def _max_sum(x_ptr, lo, hi, C: tl.constexpr, EV: tl.constexpr, SCALAR: tl.constexpr):
    if SCALAR:
        row_max = tl.full([], -float("inf"), dtype=tl.float32)
        total = tl.zeros([], dtype=tl.float32)
        for start in range(lo, hi, C):
            cols = start + tl.arange(0, C)
            x = tl.load(x_ptr + cols, mask=cols < hi, other=-float("inf"), eviction_policy=EV).to(tl.float32)
            m_new = tl.maximum(row_max, tl.max(x, axis=0))
            seen = m_new > -float("inf")
            total = tl.where(seen, total * tl.exp(row_max - m_new) + tl.sum(tl.exp(x - m_new), axis=0), 0.0)
            row_max = m_new
        return row_max, total
    m = tl.full([C], -float("inf"), dtype=tl.float32)
    s = tl.zeros([C], dtype=tl.float32)
    for start in range(lo, hi, C):
        cols = start + tl.arange(0, C)
        x = tl.load(x_ptr + cols, mask=cols < hi, other=-float("inf"), eviction_policy=EV).to(tl.float32)
        m_new = tl.maximum(m, x)
        scale = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    return SM._merge_max_sum(m, s)


@triton.jit
def _write(x_ptr, y_ptr, lo, hi, row_max, total, C: tl.constexpr, EV: tl.constexpr):
    for start in range(lo, hi, C):
        cols = start + tl.arange(0, C)
        ok = cols < hi
        x = tl.load(x_ptr + cols, mask=ok, other=-float("inf"), eviction_policy=EV).to(tl.float32)
        tl.store(y_ptr + cols, (tl.exp(x - row_max) / total).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _seg_stats(X, SEG_MAX, SEG_SUM, stride_x, n_cols, seg_len, n_segs, C: tl.constexpr, EV: tl.constexpr):
    row, seg = tl.program_id(0), tl.program_id(1)
    lo = seg * seg_len
    seg_max, seg_sum = _max_sum(X + row.to(tl.int64) * stride_x, lo, tl.minimum(lo + seg_len, n_cols), C, EV, False)
    tl.store(SEG_MAX + row * n_segs + seg, seg_max)
    tl.store(SEG_SUM + row * n_segs + seg, seg_sum)


@triton.jit
def _seg_out(X, Y, SEG_MAX, SEG_SUM, stride_x, stride_y, n_cols, seg_len, n_segs, C: tl.constexpr,
             SEGS: tl.constexpr, EV: tl.constexpr, WAIT: tl.constexpr):
    if WAIT:
        gdc_wait()
    row, seg = tl.num_programs(0) - 1 - tl.program_id(0), tl.num_programs(1) - 1 - tl.program_id(1)
    k = tl.arange(0, SEGS)
    maxes = tl.load(SEG_MAX + row * n_segs + k, mask=k < n_segs, other=-float("inf"))
    sums = tl.load(SEG_SUM + row * n_segs + k, mask=k < n_segs, other=0.0)
    row_max, total = SM._merge_max_sum(maxes, sums)
    lo = seg * seg_len
    _write(X + row.to(tl.int64) * stride_x, Y + row.to(tl.int64) * stride_y, lo, tl.minimum(lo + seg_len, n_cols),
           row_max, total, C, EV)


@triton.jit
def _row(X, Y, stride_x, stride_y, n_cols: tl.constexpr, C: tl.constexpr, SCALAR: tl.constexpr, EV1: tl.constexpr,
         EV2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_max, total = _max_sum(X + row * stride_x, 0, n_cols, C, EV1, SCALAR)
    _write(X + row * stride_x, Y + row * stride_y, 0, n_cols, row_max, total, C, EV2)


def split(x, segs, hints):
    rows, n = x.shape
    seg_len = triton.cdiv(n, segs)
    y = torch.empty_like(x)
    seg_max = torch.empty(rows, segs, dtype=torch.float32, device=x.device)
    seg_sum = torch.empty_like(seg_max)
    c = min(SM.SPLIT_CHUNK, triton.next_power_of_2(seg_len))
    _seg_stats[(rows, segs)](x, seg_max, seg_sum, x.stride(0), n, seg_len, segs, C=c,
                             EV="evict_last" if hints else "", num_warps=8)
    _seg_out[(rows, segs)](x, y, seg_max, seg_sum, x.stride(0), y.stride(0), n, seg_len, segs, C=c,
                           SEGS=triton.next_power_of_2(segs), EV="evict_first" if hints else "", num_warps=8,
                           **dependent_kwargs(x.device))
    return y


def by_row(x, c, warps, scalar, hints):
    y = torch.empty_like(x)
    _row[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], C=c, SCALAR=scalar,
                        EV1="evict_last" if hints else "", EV2="evict_first" if hints else "", num_warps=warps)
    return y


def cases(smoke: bool):
    dev = "cpu" if smoke else "cuda"
    for rows, dim in ([(4, 3000), (3, 5000)] if smoke else [(64, 262144), (256, 65536)]):
        g = torch.Generator(device=dev).manual_seed(0)
        x = (4 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        calls = {} if smoke else {"copy": lambda x=x, y=y: y.copy_(x)}
        calls["base"] = lambda x=x: SM.softmax_fwd(x)
        if dim > 65536 or smoke:
            lib_segs = SM.row_segments(rows, dim, x.device)[0] if not smoke else 2
            for hints in (False, True):
                tag = "ev" if hints else "none"
                calls[tag] = lambda x=x, h=hints, s=lib_segs: split(x, s, h)
                if hints:
                    for segs in (8, 32):
                        calls[f"ev-seg{segs}"] = lambda x=x, s=segs: split(x, s, True)
        if dim <= 65536:
            for hints in (False, True):
                for c, warps, scalar in ((16384, 32, True), (16384, 16, True), (4096, 8, False), (4096, 16, True)):
                    if smoke:
                        c = 1024
                    tag = f"{'ev' if hints else 'none'}{c}-w{warps}{'-s' if scalar else ''}"
                    calls[tag] = lambda x=x, c=c, w=warps, s=scalar, h=hints: by_row(x, c, w, s, h)
        yield rows, dim, calls, torch.softmax(x.double(), -1), 2 * rows * dim * 2


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path: str | None, smoke: bool):
    out = open(path, "w") if path else None
    if not smoke:
        from torch.profiler import ProfilerActivity, profile

        from bench.timing import TimingConfig, l2_flusher, time_cuda
        cfg = TimingConfig()
        flush = l2_flusher(torch.cuda.current_device())
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(), triton=triton.__version__)
    bad = 0
    for rows, dim, calls, ref, nbytes in cases(smoke):
        for name, fn in calls.items():
            if name != "copy":
                err = float((fn().double() - ref).abs().max() / ref.abs().max())
                bad += err > 2e-2
                emit(out, kind="check", shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
        if smoke:
            continue
        for rnd in range(2):
            for name, fn in calls.items():
                us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2),
                     pct=round(100 * nbytes / (us * 1e-6) / 1e9 / COPY_GBPS, 1))
        for name in ("base", "ev", "ev16384-w32-s"):
            if name in calls:
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(20):
                        flush()
                        calls[name]()
                    torch.cuda.synchronize()
                kernels = {k.key[:50]: round(k.self_device_time_total / k.count, 2) for k in prof.key_averages()
                           if k.self_device_time_total > 0 and k.count >= 20 and "Fill" not in k.key}
                emit(out, kind="profile", shape=[rows, dim], variant=name, kernels_us=kernels)
    if smoke and bad:
        raise SystemExit(f"{bad} variants off float64")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else (None if smoke else "explore44.jsonl"), smoke)
