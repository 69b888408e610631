"""Session 29: how much the copy floor, and the kernels on it, move with where their buffers were allocated.

explore74 read a copy of 32 MB in and 32 MB out at 18.4-18.5 us on two pairs of buffers and 20.2 us on a third,
within one process; session 26 (explore62) read 20.2-20.7 on four pairs on another lease. Here eight (x, y) pairs
of 4096 x 4096 bf16, each timed with a copy, the library's rmsnorm forward (no statistics) at 4096 x 4096 and
1024 x 16384 views, and its softmax forward at 4096 x 4096; two rounds with the harness's flush buffer, then it
is allocated afresh (behind a 1 GB spacer) and two rounds more. Every call timed by bench.timing (L2 zeroed
before each call). The buffers' addresses are recorded.

Run from the repository root: python3 baselines/h200/s29/explore75.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s29/explore75.py --smoke   (CPU: the calls run once)
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


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    rows, dim, pairs_n = (4, 64, 2) if smoke else (4096, 4096, 8)
    g = torch.Generator(device=dev).manual_seed(0)
    pairs = []
    for _ in range(pairs_n):
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        pairs.append((x, torch.empty_like(x)))
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    w4 = (1 + 0.1 * torch.randn(dim * 4, device=dev, generator=g)).bfloat16()
    calls = {}
    for i, (x, y) in enumerate(pairs):
        emit(out, kind="pair", pair=i, x=hex(x.data_ptr()), y=hex(y.data_ptr()))
        calls[(i, "copy")] = lambda x=x, y=y: y.copy_(x)
        calls[(i, "rmsnorm 4096x4096")] = lambda x=x, y=y: RN.rmsnorm_fwd(x, w, out=y, stats=False)
        x4, y4 = x.view(rows // 4, dim * 4), y.view(rows // 4, dim * 4)
        calls[(i, "rmsnorm 1024x16384")] = lambda x=x4, y=y4: RN.rmsnorm_fwd(x, w4, out=y, stats=False)
        calls[(i, "softmax 4096x4096")] = lambda x=x, y=y: SM.softmax_fwd(x, out=y)
    if smoke:
        for fn in calls.values():
            fn()
        print("smoke: every call ran")
        return
    import bench.timing as BT
    cfg = BT.TimingConfig()
    emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name())
    spacer = None
    for flush_buf in range(2):
        if flush_buf:  # a fresh flush buffer, elsewhere
            BT._FLUSHERS.clear()
            torch.cuda.empty_cache()
            spacer = torch.empty(2**30, dtype=torch.uint8, device=dev)
        BT.l2_flusher(torch.cuda.current_device())
        flush_ptr = hex(BT._FLUSHERS[torch.cuda.current_device()].buf.data_ptr())
        for rnd in range(2):
            for (pair, name), fn in calls.items():
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", flush=flush_buf, flush_ptr=flush_ptr, round=rnd, pair=pair, call=name,
                     us=round(us, 2))
    del spacer


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
