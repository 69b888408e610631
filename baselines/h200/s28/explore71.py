"""Session 28: the norm forwards at 16K-wide rows, 16 against 32 warps. The bench at 8e5871a read layernorm
65536 x 16384 fwd at 1120 us (the autotuner took 32 warps: its own timings 1118 against 1152 us for 16) where the
baseline file read 1016 (16 warps; its timings 1155 against 1193). Here each warp count is forced (the autotuner
given that one config) and timed three ways, alternating, three rounds: by bench.timing (what the bench reports),
by the autotuner's quick_bench (triton.testing.do_bench, 5 + 20 ms, the mean), and by do_bench's median. Before
the rounds and after them the real autotuner tunes each case afresh and its timings are recorded.

Run from the repository root: python3 baselines/h200/s28/explore71.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s28/explore71.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import quick_bench  # noqa: E402

T0 = time.time()


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def inputs(rows, dim, dev):
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    return x, w, b


KERNELS = {"rmsnorm": RN._rmsnorm_fwd_kernel, "layernorm": LN._layernorm_fwd_kernel}
ALL = {name: list(k.configs) for name, k in KERNELS.items()}


def use(name, warps):
    """The kernel's autotuner given only the configs of `warps` (None: all of them), its picks forgotten."""
    k = KERNELS[name]
    k.configs = [c for c in ALL[name] if warps is None or c.num_warps == warps]
    k.cache = {}


def fresh_tune(out, name, fn, label):
    use(name, None)
    fn()
    timings = {str(c): round(t if isinstance(t, float) else t[0], 5)
               for c, t in getattr(KERNELS[name], "configs_timings", {}).items()}
    emit(out, kind="autotune", case=label, when=name, timings=timings)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    shapes = [(3, 16384)] if smoke else [(65536, 16384), (16384, 16384), (4096, 16384)]
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timers = {"bench": lambda fn: BT.time_call(fn, "cuda", cfg).summary()["median_ms"] * 1e3,
                  "quick_bench_mean": lambda fn: quick_bench(fn) * 1e3,
                  "do_bench_median": lambda fn: triton.testing.do_bench(fn, warmup=5, rep=20,
                                                                         return_mode="median") * 1e3}
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())
    else:
        timers = {"once": lambda fn: (fn(), 0.0)[1]}
    cases = []
    for rows, dim in shapes:
        x, w, b = inputs(rows, dim, dev)
        ref_r = RN.rmsnorm_fwd(x.float(), w.float(), stats=False)[0]
        ref_l = LN.layernorm_fwd(x.float(), w.float(), b.float(), stats=False)[0]
        cases += [("rmsnorm", f"rmsnorm fwd {rows}x{dim}", lambda x=x, w=w: RN.rmsnorm_fwd(x, w, stats=False)[0],
                   ref_r),
                  ("layernorm", f"layernorm fwd {rows}x{dim}",
                   lambda x=x, w=w, b=b: LN.layernorm_fwd(x, w, b, stats=False)[0], ref_l)]
    for name, label, fn, ref in cases:
        fresh_tune(out, name, fn, label) if not smoke else None
        for warps in ((4,) if smoke else (16, 32)):
            use(name, warps)
            err = float((fn().float() - ref).abs().max() / ref.abs().max())
            emit(out, kind="check", case=label, warps=warps, rel_err=err)
            assert err < 1e-2, (label, warps, err)
    for rnd in range(1 if smoke else 3):
        for name, label, fn, _ in cases:
            for warps in ((4,) if smoke else (16, 32)):
                use(name, warps)
                for tname, timer in timers.items():
                    emit(out, kind="time", case=label, warps=warps, timer=tname, round=rnd, us=round(timer(fn), 2))
    if not smoke:
        for name, label, fn, _ in cases:
            fresh_tune(out, name, fn, label + " (after)")
    for name in KERNELS:
        use(name, None)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
