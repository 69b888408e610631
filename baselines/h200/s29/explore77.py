"""Session 29: does a memory-bound kernel's time depend on the values it moves?

explore76 read the library's softmax forward at 4096 x 4096 bf16 at 19.3 us on x = randn + 0.5 and 20.9 us on
the component's own inputs (3 * randn), one after the other in one process with the same autotuner pick. Here
one x buffer and one y buffer are kept; before each timing the values of one data set are copied into x (and y
reset to them), then a copy (y <- x), the softmax forward and the rmsnorm forward (no statistics) are timed by
bench.timing (L2 zeroed before each call), at 4096 x 4096 and at the 1024 x 16384 view of the same buffers,
three rounds alternating. Data sets: randn + 0.5, 3 * randn, randn, all ones, all zeros. The autotuner's picks
are fixed before the rounds (one call on randn + 0.5) and recorded.

Run from the repository root: python3 baselines/h200/s29/explore77.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s29/explore77.py --smoke   (CPU)
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
    rows, dim = (4, 64) if smoke else (4096, 4096)
    g = torch.Generator(device=dev).manual_seed(0)
    r = torch.randn(rows, dim, device=dev, generator=g)
    data = {"randn+0.5": (r + 0.5).bfloat16(), "3*randn": (3 * r).bfloat16(), "randn": r.bfloat16(),
            "ones": torch.ones(rows, dim, device=dev).bfloat16(), "zeros": torch.zeros(rows, dim, device=dev).bfloat16()}
    x, y = torch.empty_like(data["randn"]), torch.empty_like(data["randn"])
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    w4 = (1 + 0.1 * torch.randn(dim * 4, device=dev, generator=g)).bfloat16()
    x4, y4 = x.view(rows // 4, dim * 4), y.view(rows // 4, dim * 4)
    calls = {"copy": lambda: y.copy_(x),
             "softmax 4096x4096": lambda: SM.softmax_fwd(x, out=y),
             "softmax 1024x16384": lambda: SM.softmax_fwd(x4, out=y4),
             "rmsnorm 4096x4096": lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False),
             "rmsnorm 1024x16384": lambda: RN.rmsnorm_fwd(x4, w4, out=y4, stats=False)}
    x.copy_(data["randn+0.5"])
    for fn in calls.values():  # the autotuner picks once, here
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    picks = {k.fn.__name__: str(k.best_config) for k in (SM._softmax_fwd_kernel, RN._rmsnorm_fwd_kernel)}
    caches = {k.fn.__name__: {str(key): str(c) for key, c in k.cache.items()}
              for k in (SM._softmax_fwd_kernel, RN._rmsnorm_fwd_kernel)}
    emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(), picks=picks, caches=caches)
    import bench.timing as BT
    cfg = BT.TimingConfig()
    for rnd in range(3):
        for dname, d in data.items():
            for name, fn in calls.items():
                x.copy_(d)
                y.copy_(d)
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", round=rnd, data=dname, call=name, us=round(us, 2))


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
