"""Session 32: what the norm backwards at 32 MiB (16M bf16 elements) stand on, and where their time goes.

The backward goal (>= 70% of the calibrated 4,279 GB/s) at 4096 x 4096 and 1024 x 16384 bf16 is 33.6 us for the
96 MiB of x, dy and dx. Timed here by bench.timing, three rounds in alternation: a copy of x (64 MiB moved) and
x + dy into dx (the backward's 96 MiB, elementwise), each norm's whole backward (rmsnorm_bwd / layernorm_bwd), the
same with the partial rows' sum left out (the launcher's sum_partials replaced by a stand-in that launches
nothing), and that sum alone on partial rows of the launcher's shape.

Run from the repository root: python3 baselines/h200/s32/explore89.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s32/explore89.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import reduction_programs, row_block, split_columns, sum_partials  # noqa: E402


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def without_sum(module, fn):
    """fn with module.sum_partials standing in for the sum: an empty result, nothing launched."""
    def call():
        real = module.sum_partials
        module.sum_partials = lambda partials, dtype: torch.empty(partials.shape[0], partials.shape[2], dtype=dtype,
                                                                  device=partials.device)
        try:
            return fn()
        finally:
            module.sum_partials = real
    return call


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    shapes = [(8, 64), (4, 300)] if smoke else [(4096, 4096), (1024, 16384)]
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        dx = torch.empty_like(x)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        block, single = row_block(dim)
        rms_programs, _ = reduction_programs(rows, block, x.device)
        ln_programs, _ = reduction_programs(rows, block, x.device, split_columns(block, single))
        rms_partials = torch.randn(1, rms_programs, dim, device=dev, generator=g)
        ln_partials = torch.randn(2, ln_programs, dim, device=dev, generator=g)
        rms = lambda: RN.rmsnorm_bwd(dy, x, w, rstd)  # noqa: E731
        ln = lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)  # noqa: E731
        calls = {"copy x": lambda: dx.copy_(x), "x + dy": lambda: torch.add(x, dy, out=dx),
                 "rmsnorm bwd": rms, "rmsnorm bwd, no sum": without_sum(RN, rms),
                 "rmsnorm sum": lambda: sum_partials(rms_partials, w.dtype),
                 "layernorm bwd": ln, "layernorm bwd, no sum": without_sum(LN, ln),
                 "layernorm sum": lambda: sum_partials(ln_partials, w.dtype)}
        for name, fn in calls.items():
            fn()
        emit(out, kind="shape", shape=[rows, dim], rms_programs=rms_programs, ln_programs=ln_programs)
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
