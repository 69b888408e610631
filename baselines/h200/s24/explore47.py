"""Session 24: why the library's one-program-a-row softmax forward (256 x 65536) got slower with 0b0b8b6's hints
(28.9 -> 31.6 us in the bench) while explore45's kernel with the same hints took 25.4.

Run from the repository root: python3 baselines/h200/s24/explore47.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s24/explore47.py --smoke   (CPU: checks only)

`lib-<outer|flat>-w<warps>[-s]`: the library's long-row branch, built from the library's own helpers
(kernels.softmax._span_max_sum, _span_softmax), with its loop over tiles (`outer`, as the library) or one row a
program (`flat`, as explore45's `_row`), STAGES 1, ROWS 1. `e45-w16`: explore45's `rcp16384-w16-s`. `base`: the
library call (autotuned). Checked against float64, timed by bench.timing (L2 zeroed before each call), two rounds.
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explore44 as E44  # noqa: E402
import explore45 as E45  # noqa: E402

from kernels import softmax as SM  # noqa: E402

COPY_GBPS = 4279.0


@triton.jit
def _lib_like(X, Y, stride_x, stride_y, n_rows, n_cols: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr,
              SCALAR: tl.constexpr, OUTER: tl.constexpr):
    if OUTER:
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            for i in range(ROWS):
                row = tile * ROWS + i
                if row < n_rows:
                    x_ptr = X + row.to(tl.int64) * stride_x
                    row_max, total = SM._span_max_sum(x_ptr, 0, n_cols, BLOCK, 1, SCALAR)
                    SM._span_softmax(x_ptr, Y + row.to(tl.int64) * stride_y, 0, n_cols, row_max, total, BLOCK, 1)
    else:
        row = tl.program_id(0)
        x_ptr = X + row.to(tl.int64) * stride_x
        row_max, total = SM._span_max_sum(x_ptr, 0, n_cols, BLOCK, 1, SCALAR)
        SM._span_softmax(x_ptr, Y + row.to(tl.int64) * stride_y, 0, n_cols, row_max, total, BLOCK, 1)


def lib_like(x, block, warps, scalar, outer):
    y = torch.empty_like(x)
    _lib_like[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[0], x.shape[1], BLOCK=block, ROWS=1,
                             SCALAR=scalar, OUTER=outer, num_warps=warps)
    return y


def main(path: str | None, smoke: bool):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    rows, dim, block = (4, 3000, 1024) if smoke else (256, 65536, 16384)
    g = torch.Generator(device=dev).manual_seed(0)
    x = (4 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
    ref = torch.softmax(x.double(), -1)
    calls = {"base": lambda: SM.softmax_fwd(x), "e45-w16": lambda: E45.by_row(x, block, 16)}
    for outer in (True, False):
        for warps, scalar in ((16, True), (32, True), (32, False)):
            calls[f"lib-{'outer' if outer else 'flat'}-w{warps}{'-s' if scalar else ''}"] = (
                lambda w=warps, s=scalar, o=outer: lib_like(x, block, w, s, o))
    bad = 0
    for name, fn in calls.items():
        err = float((fn().double() - ref).abs().max() / ref.abs().max())
        bad += err > 2e-2
        E44.emit(out, kind="check", shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
    if smoke:
        raise SystemExit(f"{bad} variants off float64" if bad else 0)
    from bench.timing import TimingConfig, time_cuda
    cfg = TimingConfig()
    for rnd in range(2):
        for name, fn in calls.items():
            us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
            E44.emit(out, kind="time", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2),
                     pct=round(100 * 4 * rows * dim / (us * 1e-6) / 1e9 / COPY_GBPS, 1))


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else (None if smoke else "explore47.jsonl"), smoke)
