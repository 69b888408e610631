"""Session 31: does a norm forward's time at 32 MiB depend on where its output lies relative to its input?

In the session's norms run the autotuners' benchmark, which times a Triton case's configs inside its check call,
read the chosen config at 4096 x 4096 and 1024 x 16384 (bf16 forward) 7-8% faster than the bench then read it
(rmsnorm 20.0 against 21.8 us at 4096 x 4096; the copy probe 20.1-20.3), both timed the same way but with the
output in a different buffer. Here rmsnorm's Triton forward (the autotuner's pick, one config throughout) and a
copy are timed by bench.timing (L2 zeroed before each call) at 4096 x 4096 bf16 writing into outputs that start at
offsets 0 B .. 96 MiB into one buffer, and into a fresh torch.empty_like(x); three rounds in alternation.

Run from the repository root: python3 baselines/h200/s31/explore84.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s31/explore84.py --smoke   (CPU)
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
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402

OFFSETS = [0, 512, 4096, 65536, 2**20, 2 * 2**20, 8 * 2**20, 32 * 2**20, 33 * 2**20, 64 * 2**20, 96 * 2**20]


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
        set_benchmark(autotune_bench)
    rows, dim = (8, 64) if smoke else (4096, 4096)
    cfg = TimingConfig.quick() if smoke else TimingConfig()
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    n = x.numel()
    pool = torch.empty(n + (OFFSETS[-1] if not smoke else 4096) // 2, dtype=torch.bfloat16, device=dev)
    targets = {f"offset {o}": pool[o // 2: o // 2 + n].view(rows, dim) for o in OFFSETS if smoke is False or o <= 4096}
    targets["fresh empty_like"] = torch.empty_like(x)
    RN.rmsnorm_fwd(x, w, 1e-6, out=targets["fresh empty_like"])  # the autotuner picks here, once
    config = str(RN._rmsnorm_fwd_kernel.best_config)
    for rnd in range(3):
        for label, y in targets.items():
            delta = (y.data_ptr() - x.data_ptr())
            for what, fn in (("rmsnorm", lambda: RN.rmsnorm_fwd(x, w, 1e-6, out=y)), ("copy", lambda: y.copy_(x))):
                t = time_call(fn, dev, cfg)
                emit(out, round=rnd, target=label, y_minus_x=delta, y_mod_2mib=y.data_ptr() % 2**21, what=what,
                     median_us=round(t.summary()["median_ms"] * 1e3, 2), config=config)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
