"""Session 32: softmax's long rows with y stored so that it does not push x out of L2.

Rows longer than a block read x twice, the second pass (_span_softmax) from L2 while writing y. At 256 x 65536
bf16 each program walks its 128 KB row twice; 2 programs an SM on 132 SMs hold about 34 MB of rows in flight,
near the L2's 50 MB, which the flush has also filled with dirty lines; at 64 x 262144 (two kernels) all of x, 32
MiB, is read before any is read again. Here y is stored plain (as the library does), with evict_first, or with
the .cs (streaming) cache modifier, so L2 keeps x rather than y: the library's kernels re-written with the store
as a constexpr, at the library's own configs (256 x 65536: one row a program, scalar statistics, 16 warps; 64 x
262144: the library's statistics kernel, then this output kernel at 8 warps). Checked against float64, then timed
by bench.timing beside the library, three rounds in alternation.

Run from the repository root: python3 baselines/h200/s32/explore93.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s32/explore93.py --smoke   (CPU)
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
from kernels import softmax as SM  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import MAX_BLOCK, dependent_kwargs, gdc_wait  # noqa: E402
from kernels.softmax import _merge_max_sum, _span_max_sum  # noqa: E402


@triton.jit
def _store(ptr, value, mask, STORE: tl.constexpr):
    if STORE == 1:
        tl.store(ptr, value, mask=mask, eviction_policy="evict_first")
    elif STORE == 2:
        tl.store(ptr, value, mask=mask, cache_modifier=".cs")
    else:
        tl.store(ptr, value, mask=mask)


@triton.jit
def _span_out(x_ptr, y_ptr, lo, hi, row_max, total, C: tl.constexpr, STORE: tl.constexpr):
    inv = 1.0 / total
    for start in range(lo, hi, C):
        cols = start + tl.arange(0, C)
        mask = cols < hi
        x = tl.load(x_ptr + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        _store(y_ptr + cols, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask, STORE)


@triton.jit
def _rows_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr, STORE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_max, total = _span_max_sum(X + row * stride_x, 0, n_cols, BLOCK, 1, True)
    _span_out(X + row * stride_x, Y + row * stride_y, 0, n_cols, row_max, total, BLOCK, STORE)


@triton.jit
def _seg_out_kernel(X, Y, SEG_MAX, SEG_SUM, stride_x, stride_y, n_cols, seg_len, n_segs, C: tl.constexpr,
                    SEGS: tl.constexpr, WAIT: tl.constexpr, STORE: tl.constexpr):
    if WAIT:
        gdc_wait()
    row, seg = tl.num_programs(0) - 1 - tl.program_id(0), tl.num_programs(1) - 1 - tl.program_id(1)
    k = tl.arange(0, SEGS)
    maxes = tl.load(SEG_MAX + row * n_segs + k, mask=k < n_segs, other=-float("inf"))
    sums = tl.load(SEG_SUM + row * n_segs + k, mask=k < n_segs, other=0.0)
    row_max, total = _merge_max_sum(maxes, sums)
    lo = seg * seg_len
    _span_out(X + row.to(tl.int64) * stride_x, Y + row.to(tl.int64) * stride_y, lo, tl.minimum(lo + seg_len, n_cols),
              row_max, total, C, STORE)


def split_softmax(x, y, store, chunk):
    rows, dim = x.shape
    segs, seg_len = SM.row_segments(rows, dim, x.device, chunk)
    seg_max = torch.empty(rows, segs, dtype=torch.float32, device=x.device)
    seg_sum = torch.empty_like(seg_max)
    SM._softmax_seg_stats_kernel[(rows, segs)](x, seg_max, seg_sum, x.stride(0), dim, seg_len, segs, C=chunk,
                                               num_warps=4)
    _seg_out_kernel[(rows, segs)](x, y, seg_max, seg_sum, x.stride(0), y.stride(0), dim, seg_len, segs, C=chunk,
                                  SEGS=triton.next_power_of_2(segs), STORE=store, num_warps=8,
                                  **dependent_kwargs(x.device))


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    shapes = [(3, 100), (2, 300)] if smoke else [(256, 65536), (64, 262144)]
    block, chunk = (64, 64) if smoke else (MAX_BLOCK, SM.SPLIT_CHUNK)
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        calls = {"library": lambda: SM.softmax_fwd(x, out=y)}
        for store, label in ((0, "plain"), (1, "evict_first"), (2, ".cs")):
            if rows == 64 or smoke:
                calls[f"split, y {label}"] = lambda store=store: split_softmax(x, y, store, chunk)
            if rows == 256 or smoke:
                calls[f"rows, y {label}"] = lambda store=store: _rows_kernel[(rows,)](
                    x, y, x.stride(0), y.stride(0), dim, BLOCK=block, STORE=store, num_warps=16)
        for name, fn in calls.items():
            y.zero_()
            fn()
            emit(out, kind="check", shape=[rows, dim], call=name, rel_err=float((y.double() - ref).norm() / ref.norm()))
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
