"""Session 30: rmsnorm forward at 1024 x 4096 bf16, each autotuner config forced, against torch.compile.

In the session's norms run the autotuner took ROWS=1 STAGES=3 at 4 warps (its benchmark: 7.78 us against 8.11
for STAGES=1 at 4 warps and 8.16 at 8) and the bench read 7.58 us against compile's 7.39; session 28's run took
STAGES=1 at 8 warps (7.52 there, STAGES=3 at 4 warps 9.31) and read 7.23 against compile's 8.10. Here each of the
four configs the prune leaves is timed by bench.timing (L2 zeroed before each call) beside torch.compile of the
eager formula (as the `compile` implementation builds it) and a copy, three rounds in alternation; and the
autotuner's benchmark (do_bench, 5 ms warmup, 20 ms, its mean) and do_bench's median are taken five times a
config, to see how far its reading moves, and (from 218c1fe on) the library autotuner's own benchmark,
kernels._autotune.quick_bench.

Run from the repository root: python3 baselines/h200/s30/explore81.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s30/explore81.py --smoke   (CPU)
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

from impls._compile import compile_fresh  # noqa: E402
from impls.rmsnorm import rmsnorm_eager  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from bench.timing import autotune_bench  # noqa: E402
from kernels._autotune import quick_bench, set_benchmark  # noqa: E402
from kernels._rows import row_block, row_grid  # noqa: E402

CONFIGS = [(1, 1, 4), (1, 1, 8), (1, 3, 4), (1, 3, 8)]  # (ROWS, STAGES, warps)


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:  # as bench's worker does since 9a5f203 (at 00e9c98 kernels/_autotune.py imported it itself)
        set_benchmark(autotune_bench)
    rows, dim = (5, 40) if smoke else (1024, 4096)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    y = torch.empty_like(x)
    block, single = row_block(dim)
    kern = RN._rmsnorm_fwd_kernel.fn

    def forced(r, s, nw):
        return lambda: kern[row_grid(rows, x.device)](x, w, y, None, x.stride(0), y.stride(0), rows, dim, 1e-6,
                                                       BLOCK=block, SINGLE=single, ROWS=r, STAGES=s, PASSES=False,
                                                       num_warps=nw)

    calls = {f"triton ROWS={r} STAGES={s} warps={nw}": forced(r, s, nw) for r, s, nw in CONFIGS}
    calls["library (autotuned)"] = lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False)
    if not smoke:
        compiled = compile_fresh(rmsnorm_eager)
        calls["compile"] = lambda: compiled(x, w)
        calls["copy"] = lambda: y.copy_(x)
    ref = rmsnorm_eager(x.double(), w.double())
    for name, fn in calls.items():
        got = fn()
        got = y if got is None or name.startswith("triton") or name.startswith("library") else got
        if name != "copy":
            emit(out, kind="check", call=name, rel_err=float((got.double() - ref).norm() / ref.norm()))
    if smoke:
        print("smoke: every call ran")
        return
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
         pick=str(RN._rmsnorm_fwd_kernel.best_config))
    import bench.timing as BT
    cfg = BT.TimingConfig()
    for rnd in range(3):
        for name, fn in calls.items():
            us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
            emit(out, kind="time", round=rnd, call=name, us=round(us, 3))
    for rnd in range(5):
        for r, s, nw in CONFIGS:
            fn = forced(r, s, nw)
            mean = triton.testing.do_bench(fn, warmup=5, rep=20) * 1e3
            median = triton.testing.do_bench(fn, warmup=5, rep=20, return_mode="median") * 1e3
            quick = quick_bench(fn) * 1e3  # the library autotuner's benchmark at this commit
            emit(out, kind="autotune", round=rnd, config=f"ROWS={r} STAGES={s} warps={nw}", mean_us=round(mean, 3),
                 median_us=round(median, 3), quick_bench_us=round(quick, 3))


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
