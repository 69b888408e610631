"""Session 32: do 32 MiB memory-bound calls run faster right after the GPU has idled?

explore91: inside bench's worker the autotuner's first tuning of rmsnorm 4096 x 4096 bf16 (each config timed right
after it was compiled, the GPU idle meanwhile) read 19.95-21.02 us; tuning again at once read 21.50-22.78, the
bench 21.50-21.60. Here rmsnorm's forward (the library call) and a 32 MiB copy are timed under the autotuners'
config (about 25 ms each) ten times back to back, after the GPU has idled 0, 0.2, 1 or 3 s; two rounds.

Run from the repository root: python3 baselines/h200/s32/explore92.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import AUTOTUNE_TIMING, autotune_bench, time_call  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402


def main(path):
    out = open(path, "w")
    set_benchmark(autotune_bench)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4096, 4096, device="cuda", generator=g).bfloat16()
    w = torch.ones(4096, device="cuda").bfloat16()
    y = torch.empty_like(x)
    calls = {"rmsnorm": lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False), "copy": lambda: y.copy_(x)}
    for fn in calls.values():
        fn()
    for rnd in range(2):
        for idle in (0.0, 0.2, 1.0, 3.0):
            for name, fn in calls.items():
                torch.cuda.synchronize()
                time.sleep(idle)
                meds = [round(time_call(fn, "cuda", AUTOTUNE_TIMING).summary()["median_ms"] * 1e3, 3) for _ in range(10)]
                row = {"round": rnd, "idle_s": idle, "call": name, "medians_us": meds, "t": round(time.time() - T0, 1)}
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
