"""Session 33: the norm backwards at 32 MiB with pipeline depths the autotuner does not offer.

The autotuner's configs pipeline the row loop with STAGES 1 or 3 (kernels._rows.gpu_configs). At 4096 x 4096 it
takes ROWS 1, 4 warps, STAGES 3 for both norms (34.1-34.6 us rmsnorm, 36.1 layernorm in explore95; the goal is
33.6); at 1024 x 16384 rmsnorm 16 warps STAGES 3, layernorm (split) 8 warps STAGES 3. Here each backward runs with
one config forced (its own autotuner cache, the configs list replaced): STAGES 2, 4 and 5 beside 3, other warp
counts, two rows a step; the whole backward (kernel and partial-row sum) timed by bench.timing beside the library,
three rounds in alternation.

Run from the repository root: python3 baselines/h200/s33/explore96.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s33/explore96.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def forced(kernel, fn, rows, warps, stages):
    """fn with the kernel's autotuner given the one config (ROWS, warps, STAGES) and a cache of its own."""
    configs, cache = [triton.Config({"ROWS": rows, "STAGES": stages}, num_warps=warps)], {}

    def call():
        real = kernel.configs, kernel.cache
        kernel.configs, kernel.cache = configs, cache
        try:
            return fn()
        finally:
            kernel.configs, kernel.cache = real
    call.cache = cache
    return call


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    square = [(1, 4, s) for s in (2, 4, 5)] + [(1, 8, s) for s in (2, 3, 4)] + [(2, 8, s) for s in (2, 3)]
    variants = {(8, 64): {"rmsnorm": [(1, 4, 2)], "layernorm": [(1, 4, 4)]},
                (4096, 4096): {"rmsnorm": square, "layernorm": square},
                (1024, 16384): {"rmsnorm": [(1, 16, 2), (1, 16, 4), (1, 32, 2), (1, 32, 3)],
                                "layernorm": [(1, 8, 2), (1, 8, 4), (1, 16, 2), (1, 16, 3)]}}
    for (rows, dim), by_norm in variants.items():
        if smoke != (rows == 8):
            continue
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        lib = {"rmsnorm": (RN._rmsnorm_bwd_kernel, lambda: RN.rmsnorm_bwd(dy, x, w, rstd)),
               "layernorm": (LN._layernorm_bwd_kernel, lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd))}
        calls = {}
        for name, (kernel, fn) in lib.items():
            want = [t.double() for t in fn()]
            calls[f"{name} library"] = fn
            emit(out, kind="check", shape=[rows, dim], call=f"{name} library",
                 config=[str(c) for c in kernel.cache.values()])
            for r, wp, s in by_norm[name]:
                label = f"{name} ROWS {r}, {wp} warps, STAGES {s}"
                call = forced(kernel, fn, r, wp, s)
                try:
                    got = call()
                except Exception as e:  # a config that does not fit (shared memory): recorded, not timed
                    emit(out, kind="check", shape=[rows, dim], call=label, error=f"{type(e).__name__}: {str(e)[:200]}")
                    continue
                diff = max(float((a.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
                           for a, ref in zip(got, want))
                emit(out, kind="check", shape=[rows, dim], call=label, rel_diff_from_library=diff)
                calls[label] = call
        if smoke:
            continue
        for rnd in range(3):
            for name, fn in calls.items():
                t = time_call(fn, dev, TimingConfig())
                s = t.summary()
                emit(out, kind="time", round=rnd, shape=[rows, dim], call=name,
                     median_us=round(s["median_ms"] * 1e3, 3), n=s["n"], method=t.method)
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
