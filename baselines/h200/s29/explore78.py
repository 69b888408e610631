"""Session 29: the copy floor and the forwards on it against where y lies relative to x.

explore76 read the library's softmax forward at 4096 x 4096 bf16 at either 19.1-19.4 us or 20.8-21.0 depending
on which buffers it was given, and explore77 showed the values in them do not matter. Here x is the first 32 MB
of one 1.5 GB allocation and y another 32 MB of it at an offset from x (32 MB to 1 GB); at each offset a copy
(y <- x), the softmax forward and the rmsnorm forward (no statistics) at 4096 x 4096 are timed by bench.timing
(L2 zeroed before each call), two rounds.

Run from the repository root: python3 baselines/h200/s29/explore78.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s29/explore78.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402

MB = 2**20


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    rows, dim = (4, 64) if smoke else (4096, 4096)
    size = rows * dim * 2
    unit = 4096 if smoke else MB  # offsets in MB on the GPU
    offsets = [32, 34, 36, 40, 48, 64, 66, 96, 128, 130, 256, 512, 514, 1024]
    arena = torch.empty(1100 * unit + size, dtype=torch.uint8, device=dev)
    x = arena[:size].view(torch.bfloat16).view(rows, dim)
    x.copy_(torch.randn(rows, dim, device=dev) + 0.5)
    w = (1 + 0.1 * torch.randn(dim, device=dev)).bfloat16()
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        BT.l2_flusher(torch.cuda.current_device())
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(), arena=hex(arena.data_ptr()),
             flush=hex(BT._FLUSHERS[torch.cuda.current_device()].buf.data_ptr()))
    for rnd in range(1 if smoke else 2):
        for off in offsets:
            y = arena[off * unit:off * unit + size].view(torch.bfloat16).view(rows, dim)
            calls = {"copy": lambda: y.copy_(x), "softmax": lambda: SM.softmax_fwd(x, out=y),
                     "rmsnorm": lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False)}
            for name, fn in calls.items():
                if smoke:
                    fn()
                    continue
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", round=rnd, y_offset_mb=off, call=name, us=round(us, 2))
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
