"""Session 28: why the bench's autotuner read layernorm 65536 x 16384 fwd at 16 warps 1,152-1,155 us (two bench
runs) where explore71, tuning the same kernel afresh in a busy process, read 1,014-1,015 and bench.timing 1,011:
is it the GPU waking from idle (the first config the autotuner times, 16 warps, pays for it)? Three probes,
three rounds: the autotuner afresh right after the GPU has idled 3 s, and right after 50 calls; and the time of
each of the first 60 back-to-back calls after 3 s idle (CUDA events around each; no L2 flush).

Run from the repository root: python3 baselines/h200/s28/explore72.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s28/explore72.py --smoke   (CPU)
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("explore71", os.path.join(HERE, "explore71.py"))
E71 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E71)  # emit, inputs, use, fresh_tune, KERNELS
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402


def ramp(fn, n):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [round(a.elapsed_time(b) * 1e3, 1) for a, b in ev]


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    shapes = [(3, 16384)] if smoke else [(65536, 16384), (4096, 16384)]
    cases = []
    for rows, dim in shapes:
        x, w, b = E71.inputs(rows, dim, dev)
        cases += [("layernorm", f"layernorm fwd {rows}x{dim}",
                   lambda x=x, w=w, b=b: LN.layernorm_fwd(x, w, b, stats=False)[0])]
    x, w, b = E71.inputs(*shapes[0], dev)
    cases.append(("rmsnorm", f"rmsnorm fwd {shapes[0][0]}x{shapes[0][1]}",
                  lambda x=x, w=w: RN.rmsnorm_fwd(x, w, stats=False)[0]))
    if smoke:
        for name, label, fn in cases:
            fn()
        print(f"{len(cases)} cases ran")
        return
    for name, label, fn in cases:  # compile both configs
        E71.fresh_tune(None, name, fn, label)
    for rnd in range(3):
        for name, label, fn in cases:
            torch.cuda.synchronize()
            time.sleep(3)
            E71.fresh_tune(out, name, fn, f"{label} idle {rnd}")
            for _ in range(50):
                fn()
            E71.fresh_tune(out, name, fn, f"{label} busy {rnd}")
        name, label, fn = cases[0]
        E71.use(name, 16)
        fn()
        torch.cuda.synchronize()
        time.sleep(3)
        E71.emit(out, kind="ramp", case=label + " 16 warps", round=rnd, us=ramp(fn, 60))
        E71.use(name, None)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
