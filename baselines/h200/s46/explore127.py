"""Session 46: what is left of explore125 under events alone: some small calls read slower after the reset than
after zeroing alone (explore126: layernorm 1024 x 4096 9.28-9.38 against 8.74-8.80 us, a copy of 1024 x 768
4.93-5.09 against 4.70-4.80), others alike (rmsnorm 1024 x 768). Hardware counters of each call after each flush.

Inside one NVTX range ("measure"), REPS times: under each flush (zeroing alone, the reset), for each call, the
flush, a sync, the call, a sync. Run under ncu with the range as its filter and --cache-control none, each flush
and call kernel is profiled in the state the one before left. OUT.json lists the samples in launch order.

Run from the repository root, on a GPU:
  ncu --clock-control none --cache-control none --nvtx --nvtx-include "measure/" --csv --metrics M,... \
      python3 baselines/h200/s46/explore127.py OUT.json > ncu.csv
  TRITON_INTERPRET=1 python3 baselines/h200/s46/explore127.py --smoke   (CPU: every call made once)
"""
from __future__ import annotations

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import norm_inputs  # noqa: E402

from bench.timing import l2_flusher  # noqa: E402
from kernels.layernorm import layernorm_fwd  # noqa: E402
from kernels.rmsnorm import rmsnorm_fwd  # noqa: E402

REPS = 4


def calls(dev) -> dict:
    """{name: fn}: the calls explore126 found moved (or not) by the flush."""
    out = {}
    x, _, w, b = norm_inputs(1024, 4096, dev)
    y = torch.empty_like(x)
    out["layernorm 1024x4096"] = lambda: layernorm_fwd(x, w, b, out=y, stats=False)
    xs, _, ws, _ = norm_inputs(1024, 768, dev)
    ys = torch.empty_like(xs)
    out["copy 1024x768"] = lambda: ys.copy_(xs)
    out["rmsnorm 1024x768"] = lambda: rmsnorm_fwd(xs, ws, out=ys, stats=False)
    xb, _, wb, bb = norm_inputs(4096, 4096, dev)
    yb = torch.empty_like(xb)
    out["layernorm 4096x4096"] = lambda: layernorm_fwd(xb, wb, bb, out=yb, stats=False)
    return out


def main() -> None:
    smoke = "--smoke" in sys.argv
    dev = "cpu" if smoke else "cuda"
    timed = calls(dev)
    for fn in timed.values():  # compile and autotune outside the range
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    flusher = l2_flusher(torch.cuda.current_device())
    order = []
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("measure")
    for rep in range(REPS):
        for flush, priorities in (("zero", False), ("reset", True)):
            flusher.priorities = priorities
            for name, fn in timed.items():
                flusher()
                torch.cuda.synchronize()
                fn()
                torch.cuda.synchronize()
                order.append({"rep": rep, "flush": flush, "call": name})
    torch.cuda.nvtx.range_pop()
    flusher.priorities = True
    with open(sys.argv[1], "w") as f:
        json.dump(order, f, indent=0)


if __name__ == "__main__":
    main()
