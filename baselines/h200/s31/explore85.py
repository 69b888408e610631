"""Session 31 (for the next session's GPU time): why the autotuners read 32 MiB forwards 5-8% below the bench.

In `norms-fwd-32mib-3d8762f.jsonl` the autotuner's reading of its pick (bench.timing.time_cuda under
AUTOTUNE_TIMING, the kernel launched directly) was 5-8% below the bench's median of the same config (time_cuda
under the default TimingConfig, the library function called): rmsnorm 19.73 against 21.54 us at 4096 x 4096 bf16,
softmax 19.20 against 20.61, below a copy's 20.0. Where the output lies does not matter (explore84). Here, at
4096 x 4096 bf16, rmsnorm's forward with one config forced, the library's rmsnorm and softmax, and a copy are timed
under both timing configs, and with the host made to spend 50 or 200 us more before each launch (a longer call to
issue makes time_cuda hold the stream longer after the L2 flush, and the flush leaves L2 full of dirty lines); five
rounds in alternation.

Run from the repository root: python3 baselines/h200/s31/explore85.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s31/explore85.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import AUTOTUNE_TIMING, TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import row_block, row_grid  # noqa: E402


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def padded(fn, us):
    """fn, after the host has spun for `us` microseconds."""
    if not us:
        return fn

    def call():
        end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < end:
            pass
        return fn()

    return call


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
    rows, dim = (8, 64) if smoke else (4096, 4096)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    y = torch.empty_like(x)
    block, single = row_block(dim)
    direct = lambda: RN._rmsnorm_fwd_kernel.fn[row_grid(rows, x.device)](  # noqa: E731
        x, w, y, None, x.stride(0), y.stride(0), rows, dim, 1e-6, BLOCK=block, SINGLE=single, ROWS=1, STAGES=1,
        PASSES=False, num_warps=8)
    base = {"rmsnorm direct (ROWS=1 STAGES=1 warps=8)": direct,
            "rmsnorm library": lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False),
            "softmax library": lambda: SM.softmax_fwd(x, out=y),
            "copy": lambda: y.copy_(x)}
    for name, fn in base.items():
        fn()
    ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double())
    direct()
    emit(out, kind="check", call="rmsnorm direct", rel_err=float((y.double() - ref).norm() / ref.norm()))
    if smoke:
        print("smoke: every call ran")
        return
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__,
         rmsnorm_pick=str(RN._rmsnorm_fwd_kernel.best_config), softmax_pick=str(SM._softmax_fwd_kernel.best_config))
    configs = {"bench": TimingConfig(), "autotune": AUTOTUNE_TIMING}
    for rnd in range(5):
        for name, fn in base.items():
            for pad in (0, 50, 200):
                if pad and name in ("rmsnorm library", "softmax library"):
                    continue
                for label, cfg in configs.items():
                    t = time_call(padded(fn, pad), dev, cfg)
                    s = t.summary()
                    emit(out, kind="time", round=rnd, call=name, host_pad_us=pad, timing=label,
                         median_us=round(s["median_ms"] * 1e3, 3), n=s["n"], cpu_us=round(t.cpu_ms * 1e3, 1),
                         late=t.extra.get("late_samples"), method=t.method)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
