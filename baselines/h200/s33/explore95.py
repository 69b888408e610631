"""Session 33: the norm backwards at 32 MiB with other numbers of programs (partial rows of dw / db).

reduction_programs gives rmsnorm and layernorm 256 programs at 4096 x 4096 (16 rows each, 4 or 8 MB of fp32
partial rows), rmsnorm 132 at 1024 x 16384 (8 rows each, 8.6 MB) and layernorm 66 row ranges (two programs each,
split). Those counts were measured in session 21, before the interleaved walk, the pipelined wide loop, the
dependent (PDL) partial-row sum and its tiling. Here the whole backward (kernel and sum) runs with
reduction_programs patched to other counts, each count autotuned once in its own autotuner cache, then timed by
bench.timing beside the library, three rounds in alternation. The goal is 33.6 us (70% of 4,279 GB/s for 96 MiB).

Run from the repository root: python3 baselines/h200/s33/explore95.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s33/explore95.py --smoke   (CPU)
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


def with_programs(module, kernel, fn, programs):
    """fn with module.reduction_programs giving `programs` (row ranges), and the kernel's autotuner cache its own."""
    cache: dict = {}

    def patched(n_rows, block, device, split=False):
        p = max(1, min(programs, n_rows))
        per = triton.cdiv(n_rows, p)
        return triton.cdiv(n_rows, per), per

    def call():
        real, real_cache = module.reduction_programs, kernel.cache
        module.reduction_programs, kernel.cache = patched, cache
        try:
            return fn()
        finally:
            module.reduction_programs, kernel.cache = real, real_cache
    call.cache = cache
    return call


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    counts = {(8, 64): {"rmsnorm": [2, 3], "layernorm": [2]},
              (4096, 4096): {"rmsnorm": [132, 176, 198, 264, 396], "layernorm": [132, 176, 198, 264, 396]},
              (1024, 16384): {"rmsnorm": [44, 64, 88, 110], "layernorm": [33, 44, 52, 60]}}
    for (rows, dim), by_norm in counts.items():
        if smoke != (rows == 8):
            continue
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        lib = {"rmsnorm": (RN, RN._rmsnorm_bwd_kernel, lambda: RN.rmsnorm_bwd(dy, x, w, rstd)),
               "layernorm": (LN, LN._layernorm_bwd_kernel, lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd))}
        calls = {}
        for name, (module, kernel, fn) in lib.items():
            want = [t.double() for t in fn()]
            calls[f"{name} library"] = fn
            for p in by_norm[name]:
                call = with_programs(module, kernel, fn, p)
                got = call()
                diff = max(float((a.double() - r).abs().max() / r.abs().max().clamp_min(1e-30))
                           for a, r in zip(got, want))
                emit(out, kind="check", shape=[rows, dim], call=f"{name} {p} programs", rel_diff_from_library=diff,
                     config=[str(c) for c in call.cache.values()])
                calls[f"{name} {p} programs"] = call
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
