"""Session 32: softmax forward of 64K-wide bf16 rows held whole in registers, in their own dtype.

The library walks a row longer than 16K twice, a running max and sum, then the output from L2 (256 x 65536 bf16:
26.0 us in norms.jsonl, a copy of the same bytes 20.0-20.3). A 64K-wide bf16 row is 128 KB: at 16 or 32 warps
a program can hold it in registers as loaded (32 or 64 registers a thread, the pairs packed), take its max, the
sum of exp(x - max), and the output from those registers, reading x once. The second exp is written as exp2 so
the compiler does not keep the first's fp32 results live (64K fp32 would fill the register file). Checked
against float64, then timed by bench.timing beside the library in alternation, three rounds, at 256 x 65536, 512 x 32768 and
1024 x 16384 (where the library holds 16K rows in registers already, as fp32).

Run from the repository root: python3 baselines/h200/s32/explore87.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s32/explore87.py --smoke   (CPU)
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

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _row_in_registers(X, Y, stride_x, stride_y, n_cols: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=ok, other=-float("inf"))  # kept in its dtype
    row_max = tl.max(x.to(tl.float32), axis=0)
    total = tl.sum(tl.exp(x.to(tl.float32) - row_max), axis=0)
    scaled_max = row_max * LOG2E
    y = tl.math.exp2(x.to(tl.float32) * LOG2E - scaled_max) * (1.0 / total)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=ok)


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
    shapes = [(3, 100), (4, 64)] if smoke else [(256, 65536), (512, 32768), (1024, 16384)]
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        block = triton.next_power_of_2(dim)
        calls = {"library": lambda: SM.softmax_fwd(x, out=y)}
        for warps in ((4,) if smoke else (16, 32)):
            calls[f"registers w{warps}"] = lambda warps=warps: _row_in_registers[(rows,)](
                x, y, x.stride(0), y.stride(0), dim, BLOCK=block, num_warps=warps)
        for name, fn in calls.items():
            y.zero_()
            handle = fn()
            err = float((y.double() - ref).norm() / ref.norm())
            extra = {}
            if name != "library" and not smoke:
                extra = {"n_regs": getattr(handle, "n_regs", None), "n_spills": getattr(handle, "n_spills", None)}
            emit(out, kind="check", shape=[rows, dim], call=name, rel_err=err, **extra)
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
