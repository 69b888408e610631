"""Session 26: the copy floor at the 16.8M-element shapes, across buffers, beside the library's forwards.

Session 25 (explore50) read a copy of 1024 x 16384 bf16 at 20.26 us after the harness's zeroing flush; this
session's explore61 read 18.88-18.94 on another lease of an H200. Here, at each 16.8M-element shape of issue 8,
a copy on each of four separately allocated (x, y) pairs, and the library's softmax, rmsnorm and layernorm
forwards (no statistics) on two of them, in alternation, three rounds; the GPU's clocks first.

Run from the repository root: python3 baselines/h200/s26/explore62.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s26/explore62.py --smoke   (CPU: the calls run once)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        query = "name,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu"
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True)
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(), smi=smi.stdout.strip())
    shapes = [(3, 50), (2, 300)] if smoke else [(4096, 4096), (1024, 16384), (256, 65536), (64, 262144)]
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        pairs = []
        for _ in range(4):
            x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
            pairs.append((x, torch.empty_like(x)))
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        calls = {}
        for i, (x, y) in enumerate(pairs):
            calls[f"copy {i}"] = lambda x=x, y=y: y.copy_(x)
        for i, (x, y) in enumerate(pairs[:2]):
            calls[f"softmax {i}"] = lambda x=x, y=y: SM.softmax_fwd(x, out=y)
            calls[f"rmsnorm {i}"] = lambda x=x, y=y: RN.rmsnorm_fwd(x, w, out=y, stats=False)
            calls[f"layernorm {i}"] = lambda x=x, y=y: LN.layernorm_fwd(x, w, b, out=y, stats=False)
        for rnd in range(1 if smoke else 3):
            for name, fn in calls.items():
                if timer is None:
                    fn()
                    continue
                emit(out, kind="time", shape=[rows, dim], call=name, round=rnd, us=round(timer(fn) * 1e3, 2))
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
