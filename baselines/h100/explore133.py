"""Session 54: whole 16K-wide rows held in registers, one a program, on an H100. Session 54's reruns of explore131
and explore132 (baselines/h100/explore131/, explore132/) read the library's fp32 layernorm forward 1.3-1.9% slower
than torch.compile at 4096-65536 x 16384, at every (warps, chunk) of its three-pass walk up to 8K. Inductor's
reduction heuristics (torch/_inductor/runtime/triton_heuristics.py: `add_persistent_rblock`) offer its autotuner,
beside a 2048-wide R0_BLOCK, one as wide as the row (16384, 32 warps). Here rows held whole are timed: a plain
whole-row kernel at 16 and 32 warps, and the library's own tile path (`library-whole`: its launcher with
`row_passes` made false, ROWS and warps autotuned), for layernorm in fp32 and bf16 and rmsnorm in bf16, beside the
library's forward, torch.compile of the eager formula and a copy of the same bytes; all by bench.timing (the
suite's timer, L2 flushed), two rounds in alternation. Inductor's generated kernels and its autotuner's picks
(`*.best_config`) for these shapes are copied into OUT_DIR/inductor/ (the run showed that its pick keeps three
loops over the row, each one 16K-wide step: the row is read three times, not held).

Run from the repository root: python3 baselines/h100/explore133.py OUT_DIR   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h100/explore133.py --smoke   (CPU)
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from explore132 import norm_inputs, run_sets  # noqa: E402
from impls.layernorm import layernorm_eager  # noqa: E402
from impls.rmsnorm import rmsnorm_eager  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RMS  # noqa: E402

_whole_caches = {}  # the autotuner's cache of each launcher's whole-row launches


@triton.jit
def _ln_row(X, W, B, Y, stride, n_cols: tl.constexpr, eps, BLOCK: tl.constexpr):
    """One whole row a program: x loaded once, the mean and the squared deviations reduced from registers."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
    mean = tl.sum(x, 0) / n_cols
    d = tl.where(ok, x - mean, 0.0)
    rstd = tl.math.rsqrt(tl.sum(d * d, 0) / n_cols + eps)
    w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(B + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(Y + row * stride + cols, (d * rstd * w + b).to(Y.dtype.element_ty), mask=ok)


@triton.jit
def _rms_row(X, W, Y, stride, n_cols: tl.constexpr, eps, BLOCK: tl.constexpr):
    """rmsnorm's forward the same way."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=ok)


def whole(module, fn):
    """fn() with the library's launcher made to hold 16K-wide rows whole (its tile path, ROWS and warps autotuned)
    instead of walking them in passes."""
    kernel = module._layernorm_fwd_kernel if module is LN else module._rmsnorm_fwd_kernel
    passes, cache = module.row_passes, kernel.cache
    module.row_passes = lambda block, single: False
    kernel.cache = _whole_caches.setdefault(module.__name__, {})  # its own autotuning, not the passes' picks
    try:
        return fn()
    finally:
        module.row_passes, kernel.cache = passes, cache


def cases_for(component, dtype, rows, dev, comp):
    """(reference, {impl: fn}) for one component, dtype and row count at 16K-wide rows."""
    dim = 16384
    x, w, b, y = norm_inputs(dtype, rows, dev)
    grid = (rows,)
    if component == "layernorm":
        ref = layernorm_eager(x.double(), w.double(), b.double())
        fns = {"library": lambda: LN.layernorm_fwd(x, w, b, out=y, stats=False)[0]}
        fns["library-whole"] = lambda: whole(LN, fns["library"])
        for warps in (16, 32):
            fns[f"row-w{warps}"] = lambda wp=warps: (
                _ln_row[grid](x, w, b, y, x.stride(0), dim, 1e-5, BLOCK=dim, num_warps=wp), y)[1]
        args = (x, w, b)
    else:
        ref = rmsnorm_eager(x.double(), w.double())
        fns = {"library": lambda: RMS.rmsnorm_fwd(x, w, out=y, stats=False)[0]}
        fns["library-whole"] = lambda: whole(RMS, fns["library"])
        for warps in (16, 32):
            fns[f"row-w{warps}"] = lambda wp=warps: (
                _rms_row[grid](x, w, y, x.stride(0), dim, 1e-6, BLOCK=dim, num_warps=wp), y)[1]
        args = (x, w)
    if comp is not None:
        fns["compile"] = lambda: comp(*args)
    fns["copy"] = lambda: y.copy_(x)
    return ref, fns


SETS = [("layernorm", torch.float32), ("layernorm", torch.bfloat16), ("rmsnorm", torch.bfloat16)]


def main(out_dir, smoke):
    run_sets("explore133", out_dir, smoke, cases_for, SETS)
    if out_dir and not smoke:  # Inductor's kernels for 16K-wide rows, and the configs its autotuner picked
        cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or f"/tmp/torchinductor_{os.environ.get('USER', 'root')}"
        dst = os.path.join(out_dir, "inductor")
        os.makedirs(dst, exist_ok=True)
        for i, path in enumerate(sorted(glob.glob(os.path.join(cache, "**", "*.py"), recursive=True))):
            text = open(path).read()
            if "16384" in text and "triton_" in text and "@triton.jit" in text:
                shutil.copy(path, os.path.join(dst, f"{i:03d}-{os.path.basename(path)}"))
                for best in glob.glob(os.path.join(os.path.dirname(path), "*.best_config")):
                    shutil.copy(best, os.path.join(dst, f"{i:03d}-{os.path.basename(best)}"))


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else None, smoke)
