"""Session 37: do the row kernels at 32 MiB lose time to rows not dividing evenly over the SMs?

4096 rows over an H200's 132 SMs are 31.03 a SM, so four SMs take a 32nd row while the others wait; 1024 rows of
16K are 7.76 a SM (eight on most). An elementwise kernel has no such step. If the norm backwards' 3.8 us over an
elementwise kernel of the same bytes (session 32, explore89) came from it, the time a row would drop at row counts
that divide evenly: 3960, 4092 (30 and 31 a SM) against 4096 and 4224 (32) at dim 4096; 924 (7) against 1024 and
1056 (8) at dim 16384.

Timed by bench.timing, three rounds in alternation, bf16: a copy of x and x + dy into dx (the floors), the library's
rmsnorm, layernorm and softmax forwards, both norm backwards whole and without the partial rows' sum, and
rmsnorm's backward row kernel at two programs an SM (dim 4096; the library picks 233-264 by row count) so the
rows a SM are 30, 31 or 32 exactly.

Run from the repository root: python3 baselines/h200/s37/explore105.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s37/explore105.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton

T0 = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s32"))

from explore89 import emit, without_sum  # noqa: E402

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import reduction_programs, row_block, sm_count  # noqa: E402


def rms_row_kernel(dy, x, w, rstd, dx, partials):
    """rmsnorm's backward row kernel alone at partials.shape[1] programs (the interleaved walk ignores
    rows_per_program for rows that fit a block)."""
    n_rows, n_cols = x.shape
    programs = partials.shape[1]
    block, single = row_block(n_cols)
    RN._rmsnorm_bwd_kernel[(programs,)](x, w, dy, rstd, dx, partials, x.stride(0), dy.stride(0), dx.stride(0),
                                        n_rows, n_cols, triton.cdiv(n_rows, programs), BLOCK=block, SINGLE=single)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    sms = 4 if smoke else sm_count(torch.device(dev))
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, sms=sms)
    shapes = ([(8, 64), (9, 64)] if smoke else
              [(30 * sms, 4096), (31 * sms, 4096), (4096, 4096), (32 * sms, 4096),
               (7 * sms, 16384), (1024, 16384), (8 * sms, 16384)])
    calls_by_shape = {}
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        dx = torch.empty_like(x)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        rms = lambda x=x, dy=dy, w=w, rstd=rstd: RN.rmsnorm_bwd(dy, x, w, rstd)  # noqa: E731
        ln = lambda x=x, dy=dy, w=w, mean=mean, lrstd=lrstd: LN.layernorm_bwd(dy, x, w, mean, lrstd)  # noqa: E731
        calls = {"copy x": lambda x=x, dx=dx: dx.copy_(x), "x + dy": lambda x=x, dy=dy, dx=dx: torch.add(x, dy, out=dx),
                 "rmsnorm fwd": lambda x=x, w=w: RN.rmsnorm_fwd(x, w, stats=False),
                 "layernorm fwd": lambda x=x, w=w, b=b: LN.layernorm_fwd(x, w, b, stats=False),
                 "softmax fwd": lambda x=x: SM.softmax_fwd(x),
                 "rmsnorm bwd": rms, "rmsnorm bwd, no sum": without_sum(RN, rms),
                 "layernorm bwd": ln, "layernorm bwd, no sum": without_sum(LN, ln)}
        if dim == 4096 or smoke:
            partials = torch.empty(1, 2 * sms, dim, dtype=torch.float32, device=dev)
            calls["rmsnorm bwd rows, 2 programs an SM"] = (
                lambda x=x, dy=dy, w=w, rstd=rstd, dx=dx, p=partials: rms_row_kernel(dy, x, w, rstd, dx, p))
            ref = RN.rmsnorm_bwd(dy, x, w, rstd)[0]
            rms_row_kernel(dy, x, w, rstd, dx, partials)
            assert torch.equal(dx, ref), "the row kernel at 2 programs an SM gives another dx"
        for fn in calls.values():
            fn()
        block, _ = row_block(dim)
        emit(out, kind="shape", shape=[rows, dim], rows_per_sm=round(rows / sms, 2),
             rms_programs=reduction_programs(rows, block, x.device)[0])
        calls_by_shape[(rows, dim)] = calls
    if smoke:
        print("smoke: every call ran")
        return
    for rnd in range(3):
        for (rows, dim), calls in calls_by_shape.items():
            for name, fn in calls.items():
                t = time_call(fn, dev, TimingConfig())
                s = t.summary()
                us = s["median_ms"] * 1e3
                emit(out, kind="time", round=rnd, shape=[rows, dim], call=name, median_us=round(us, 3),
                     us_per_row=round(us / rows, 5), n=s["n"], method=t.method)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
