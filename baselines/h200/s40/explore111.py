"""Session 40: softmax over few long rows with S programs a row, each taking the whole row's max and sum itself.

The library runs 256 x 65536 one program a row (two programs an SM, each reading its row twice: 25.5 us in session
38, against a copy's 20.0) and 64 x 262144 as two kernels over 4K segments (30.7 us). At 128 x 65536, one
program an SM, it took 18.0-18.2 us against a copy's 10.1-11.0 (session 29, explore79): one program walking a row
leaves the SM short of loads in flight. Here program (row, s) of S reads the whole row for its max and sum, then
writes segment s of the output: S programs a row, one kernel, nothing shared between programs. The S reads of a
row for the statistics are meant to meet in L2 (a row's programs are launched side by side), so DRAM still reads
x about once. With ROTATE, a program takes its statistics over the row starting after its own segment, so that
its segment is the last read before the output pass re-reads it.

Variants (S, ROTATE, C columns a chunk, warps, STAGES), the statistics a scalar pair (SCALAR), three rounds, bf16,
each checked against float64 (torch.softmax of x in float64, relative L2 error).

Run from the repository root: python3 baselines/h200/s40/explore111.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s40/explore111.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _explore import begin, command_line, emit, timed_rounds  # noqa: E402

from kernels import softmax as SM  # noqa: E402
from kernels.softmax import _span_max_sum, _span_softmax  # noqa: E402,F401 - called from the kernel

SHAPES = [(256, 65536), (64, 262144), (128, 65536)]
VARIANTS = [(s, rot, c, w, st) for s in (2, 4) for rot in (False, True)
            for c, w, st in ((4096, 8, 1), (4096, 8, 3), (8192, 8, 3), (8192, 16, 1))]


@triton.jit
def _own_stats(X, Y, stride_x, stride_y, n_cols: tl.constexpr, seg_len, S: tl.constexpr, C: tl.constexpr,
               STAGES: tl.constexpr, ROTATE: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // S
    seg = pid % S
    x_ptr = X + row.to(tl.int64) * stride_x
    lo = seg * seg_len
    hi = tl.minimum(lo + seg_len, n_cols)
    if ROTATE:  # [hi, n_cols), then [0, hi): this program's segment read last
        m1, t1 = _span_max_sum(x_ptr, hi, n_cols, C, STAGES, True)
        m2, t2 = _span_max_sum(x_ptr, 0, hi, C, STAGES, True)
        row_max = tl.maximum(m1, m2)
        total = t1 * tl.exp(m1 - row_max) + t2 * tl.exp(m2 - row_max)  # m2 is finite: [0, hi) holds a column
    else:
        row_max, total = _span_max_sum(x_ptr, 0, n_cols, C, STAGES, True)
    _span_softmax(x_ptr, Y + row.to(tl.int64) * stride_y, lo, hi, row_max, total, C, STAGES)


def own_stats(s: int, rotate: bool, c: int, warps: int, stages: int):
    def fwd(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        seg_len = triton.cdiv(triton.cdiv(n_cols, s), c) * c
        _own_stats[(n_rows * s,)](x, y, x.stride(0), y.stride(0), n_cols, seg_len, S=s, C=c, STAGES=stages,
                                  ROTATE=rotate, num_warps=warps)
        return y
    return fwd


def main(shapes, path, smoke):
    out, dev = begin(path, smoke)
    shapes = [(3, 20000), (2, 9000)] if smoke else shapes
    variants = [(2, True, 4096, 4, 1), (4, False, 4096, 4, 3)] if smoke else VARIANTS
    calls = {}
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        exact = torch.softmax(x.double(), dim=-1)
        impls = {"lib": SM.softmax_fwd,
                 **{f"S{s}{'-rot' if rot else ''}-c{c}-w{w}-s{st}": own_stats(s, rot, c, w, st)
                    for s, rot, c, w, st in variants}}
        for name, fn in impls.items():
            try:
                got = fn(x)
            except Exception as e:  # noqa: BLE001 - a variant that fails is a result
                emit(out, kind="error", shape=[rows, dim], impl=name, error=f"{type(e).__name__}: {str(e)[:300]}")
                continue
            err = float((got.double() - exact).norm() / exact.norm())
            emit(out, kind="check", shape=[rows, dim], impl=name, rel_err=err, ok=err < 1e-2)
            calls[(rows, dim, name)] = lambda fn=fn, x=x: fn(x)
    if smoke:
        print("smoke: every call ran")
        return
    copies = {}
    for rows, dim in shapes:
        src = torch.randn(rows, dim, device=dev).bfloat16()
        dst = torch.empty_like(src)
        copies[(rows, dim, "copy")] = lambda src=src, dst=dst: dst.copy_(src)
    calls.update(copies)
    timed_rounds(out, calls, dev)


if __name__ == "__main__":
    main(*command_line(SHAPES))
