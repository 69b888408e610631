"""Session 23: where the norm backwards' time goes at the points that miss 70%, at the submitted kernels: each
kernel's CUDA time under torch.profiler (the backward's row kernel, the partial-row sum launched as a dependent),
20 calls each after an L2 flush, beside the whole call timed by bench.timing and an add of the same bytes (two
tensors read, one written: the floor a row kernel that reads x and dy and writes dx sits against).

Run from the repository root: python3 baselines/h200/s23/explore42.py OUT.jsonl
"""
from __future__ import annotations

import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from bench.timing import TimingConfig, l2_flusher, time_cuda
from kernels import layernorm as LN
from kernels import rmsnorm as RN

SHAPES = [(4096, 4096), (1024, 16384), (4096, 16384)]


def main(path: str):
    cfg = TimingConfig()
    flush = l2_flusher(torch.cuda.current_device())
    with open(path, "w") as out:
        for rows, dim in SHAPES:
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(rows, dim, device="cuda", generator=g).bfloat16()
            dy = torch.randn(rows, dim, device="cuda", generator=g).bfloat16()
            w = (1 + 0.1 * torch.randn(dim, device="cuda", generator=g)).bfloat16()
            b = torch.zeros(dim, device="cuda").bfloat16()
            add_out = torch.empty_like(x)
            _, rstd = RN.rmsnorm_fwd(x, w)
            _, mean, lrstd = LN.layernorm_fwd(x, w, b)
            calls = {"add": lambda: torch.add(x, dy, out=add_out),
                     "rmsnorm": lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                     "layernorm": lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
            for name, fn in calls.items():
                us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(20):
                        flush()
                        fn()
                    torch.cuda.synchronize()
                kernels = {k.key[:60]: round(k.self_device_time_total / k.count, 2) for k in prof.key_averages()
                           if k.self_device_time_total > 0 and k.count >= 20 and "Fill" not in k.key}
                row = {"shape": [rows, dim], "call": name, "bench_us": round(us, 2),
                       "kernels_us": kernels,
                       "pct_of_copy_bw": round(100 * 3 * rows * dim * 2 / (us * 1e-6) / 1e9 / 4279.0, 1)}
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "explore42.jsonl")
