"""Session 37: the partial-row sum's steps. explore105 found the norm backwards' sum costing 7.8-8.1 us at 3960 and
4092 x 4096 (233 and 241 partial rows) against 2.4 at 4096 x 4096 (256), and 5.7-5.9 at 924 and 1056 x 16384 (132)
against 3.3 at 1024 x 16384 (128). sum_partials walks the partial rows BP at a time: BP = 256 from 256 partial rows
up, else 64, so 233-241 rows take four steps of 64, 132 take three, 128 two, 256 one.

Here each norm backward runs whole with its sum tiled other ways (the library's _sum_partials_kernel, launched as
the library launches it), at the library's program counts, three rounds, bf16, timed by bench.timing:
  lib        the library's sum_partials
  one-8w     every partial row in one step: BP = next_power_of_2(programs), BN = 8192 / BP (8 to 64), 8 warps
  one-4w     the same at 4 warps, BN = 4096 / BP (8 to 64)
  two-8w     two steps: BP = next_power_of_2(programs) / 2, BN = 8192 / BP (8 to 64), 8 warps
Each sum is checked against the float64 sum of its partial rows.

Run from the repository root: python3 baselines/h200/s37/explore106.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s37/explore106.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s32"))

from explore89 import emit  # noqa: E402

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402


def summed_as(tiling):
    """A sum_partials launching the library's _sum_partials_kernel as the library does, tiled by
    tiling(n_programs, n_cols) -> (BN, BP, warps) instead of kernels._rows.sum_tiling."""
    def sum_partials(partials, dtype):
        k, n_programs, n_cols = partials.shape
        out = torch.empty(k, n_cols, dtype=dtype, device=partials.device)
        bn, bp, warps = tiling(n_programs, n_cols)
        _rows._sum_partials_kernel[(triton.cdiv(n_cols, bn), k)](partials, out, n_programs, n_cols, BN=bn, BP=bp,
                                                                 num_warps=warps,
                                                                 **_rows.dependent_kwargs(partials.device))
        return out
    return sum_partials


def tiled(steps: int, elements: int, warps: int):
    """A sum_partials that walks the partial rows in `steps` steps of [BP, BN], BP * BN = elements."""
    def tiling(n_programs, n_cols):
        bp = max(triton.next_power_of_2(n_programs) // steps, 1)
        return min(max(elements // bp, 8), 64, triton.next_power_of_2(n_cols)), bp, warps
    return summed_as(tiling)


SHAPES = [(4092, 4096), (4096, 4096), (4224, 4096), (924, 16384), (1024, 16384), (1056, 16384), (65536, 768),
          (2048, 2048), (16384, 4096)]
SUMS = {"lib": _rows.sum_partials, "one-8w": tiled(1, 8192, 8), "one-4w": tiled(1, 4096, 4),
        "two-8w": tiled(2, 8192, 8)}


def with_sum(module, sum_fn, fn):
    """fn with module.sum_partials replaced by sum_fn."""
    def call():
        real = module.sum_partials
        module.sum_partials = sum_fn
        try:
            return fn()
        finally:
            module.sum_partials = real
    return call


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    shapes = [(8, 64), (37, 300)] if smoke else SHAPES
    calls = {}
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        rms = lambda x=x, dy=dy, w=w, rstd=rstd: RN.rmsnorm_bwd(dy, x, w, rstd)  # noqa: E731
        ln = lambda x=x, dy=dy, w=w, mean=mean, lrstd=lrstd: LN.layernorm_bwd(dy, x, w, mean, lrstd)  # noqa: E731
        for norm, module, fn in (("rmsnorm", RN, rms), ("layernorm", LN, ln)):
            seen = {}
            real = module.sum_partials

            def spy(partials, dtype, seen=seen):
                seen["partials"] = partials.clone()
                return real(partials, dtype)
            with_sum(module, spy, fn)()
            partials = seen["partials"]
            exact = partials.double().sum(1)  # [k, dim]
            for name, sum_fn in SUMS.items():
                got = sum_fn(partials, torch.float32).double()
                err = float((got - exact).abs().max() / exact.abs().max())
                emit(out, kind="check", shape=[rows, dim], norm=norm, sum=name, partial_rows=partials.shape[1],
                     max_rel_err=err, ok=err < 1e-6)
                calls[(rows, dim, norm, name)] = with_sum(module, sum_fn, fn)
    for fn in calls.values():
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    for rnd in range(3):
        for (rows, dim, norm, name), fn in calls.items():
            s = time_call(fn, dev, TimingConfig()).summary()
            emit(out, kind="time", round=rnd, shape=[rows, dim], norm=norm, sum=name,
                 median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])


def cli(sums=None, shapes=None):
    """python3 SCRIPT OUT.jsonl [ROWSxDIM ...] | --smoke, with explore107-108's sums and shapes in place of these;
    shapes on the command line replace them too."""
    global SUMS, SHAPES
    SUMS, SHAPES = sums or SUMS, shapes or SHAPES
    picked = [a for a in sys.argv[1:] if a[:1].isdigit()]
    if picked:
        SHAPES = [tuple(int(v) for v in a.split("x")) for a in picked]
    paths = [a for a in sys.argv[1:] if not a.startswith("--") and a not in picked]
    main(paths[0] if paths else None, "--smoke" in sys.argv)


if __name__ == "__main__":
    cli()
