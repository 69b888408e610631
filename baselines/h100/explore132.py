"""Session 52: 16K-wide norm forwards on an H100 where Triton ties or loses to torch.compile.
- layernorm in fp32: the suite's corner set (baselines/h100/layernorm-fp32.jsonl) read Triton 1.2% slower than
  compile at 4096 x 16384 and 1.4% at 65536 x 16384, and explore131 found 8K chunks faster than 4K at every fp32
  row count but still slower than compile. Here explore130's copy of the three-pass walk is timed at every
  (warps, chunk) of 8/16/32 and 2K/4K/8K, eviction hints on, in fp32.
- rmsnorm in bf16: the suite tied compile within 0.1% at 16384 and 65536 x 16384 (its passes walk 4K chunks, the
  autotuner picking 16 or 32 warps). Here a copy of that two-pass walk is timed at (warps, chunk) of 16/32 and
  4K/8K, beside the library's kernel.
Each beside torch.compile of the eager formula and a copy of the same bytes; all by bench.timing (the suite's
timer, L2 flushed), two rounds in alternation. Inductor's generated kernels for these shapes are copied into
OUT_DIR/inductor/ to read its launch choices.

Run from the repository root: python3 baselines/h100/explore132.py OUT_DIR   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h100/explore132.py --smoke   (CPU)
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from explore130 import variant as ln_variant  # noqa: E402
from impls.layernorm import layernorm_eager  # noqa: E402
from impls.rmsnorm import rmsnorm_eager  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RMS  # noqa: E402

T0 = time.time()


@triton.jit
def _rms_passes(X, W, Y, stride, n_cols: tl.constexpr, eps, C: tl.constexpr):
    """`_rmsnorm_fwd_passes` without rstd, the chunk width a parameter."""
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride
    acc = tl.zeros([C], dtype=tl.float32)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, 0) / n_cols + eps)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=ok)


def rms_variant(x, w, y, warps, c):
    _rms_passes[(x.shape[0],)](x, w, y, x.stride(0), x.shape[1], 1e-6, C=c, num_warps=warps)
    return y


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def norm_inputs(dtype, rows, dev):
    """x [rows, 16384], w, b (seeded) and an output y for the norm forwards."""
    dim = 16384
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).to(dtype)
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).to(dtype)
    b = (0.1 * torch.randn(dim, device=dev, generator=g)).to(dtype)
    return x, w, b, torch.empty_like(x)


def cases_for(component, dtype, rows, dev, comp):
    """(shape, {impl: fn}) for one component, dtype and row count at 16K-wide rows, each checked against float64."""
    x, w, b, y = norm_inputs(dtype, rows, dev)
    if component == "layernorm":
        ref = layernorm_eager(x.double(), w.double(), b.double())
        fns = {"library": lambda: LN.layernorm_fwd(x, w, b, out=y, stats=False)[0]}
        combos = [(4, 4096)] if dev == "cpu" else [(wp, c) for wp in (8, 16, 32) for c in (2048, 4096, 8192)]
        for warps, c in combos:
            fns[f"w{warps}-c{c}"] = lambda a=(warps, c, True): ln_variant(x, w, b, y, *a)
        args = (x, w, b)
    else:
        ref = rmsnorm_eager(x.double(), w.double())
        fns = {"library": lambda: RMS.rmsnorm_fwd(x, w, out=y, stats=False)[0]}
        combos = [(4, 4096)] if dev == "cpu" else [(wp, c) for wp in (16, 32) for c in (4096, 8192)]
        for warps, c in combos:
            fns[f"w{warps}-c{c}"] = lambda a=(warps, c): rms_variant(x, w, y, *a)
        args = (x, w)
    if comp is not None:
        fns["compile"] = lambda: comp(*args)
    fns["copy"] = lambda: y.copy_(x)
    return ref, fns


def run_sets(name, out_dir, smoke, cases_for, sets):
    """Every (component, dtype) of sets at 1024-65536 x 16384 (3 rows with `smoke`, on CPU): each impl of
    cases_for(component, dtype, rows, dev, comp) checked against float64, then timed, two rounds in alternation,
    into OUT_DIR/NAME.jsonl."""
    dev = "cpu" if smoke else "cuda"
    out = None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        out = open(os.path.join(out_dir, f"{name}.jsonl"), "w")
    if smoke:
        def timer(fn):
            fn()
            return 0.0
    else:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())

        def timer(fn):
            return round(BT.time_call(fn, "cuda", cfg).summary()["median_ms"] * 1e3, 2)
    for component, dtype in sets:
        cases = []  # one compiled function a set, specialized per shape (dynamic=False)
        comp = None if smoke else torch.compile(layernorm_eager if component == "layernorm" else rmsnorm_eager,
                                                dynamic=False)
        for rows in ((3,) if smoke else (1024, 4096, 16384, 65536)):
            ref, fns = cases_for(component, dtype, rows, dev, comp)
            shape = f"{rows}x16384"
            for impl, fn in fns.items():  # checked (and compiled) before any timing
                if impl == "copy":
                    continue
                got = fn().double()
                err = float((got - ref).abs().max() / ref.abs().max())
                emit(out, kind="check", component=component, dtype=str(dtype), shape=shape, impl=impl, rel_err=err)
                assert err < 2e-2, (component, shape, impl, err)
            cases.append((shape, fns))
        for rnd in range(1 if smoke else 2):
            for shape, fns in cases:
                for impl, fn in fns.items():
                    emit(out, kind="time", component=component, dtype=str(dtype), shape=shape, impl=impl,
                         round=rnd, us=timer(fn))
        del cases
        torch.cuda.empty_cache() if not smoke else None


def main(out_dir, smoke):
    run_sets("explore132", out_dir, smoke, cases_for, [("layernorm", torch.float32), ("rmsnorm", torch.bfloat16)])
    if out_dir and not smoke:
        cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or f"/tmp/torchinductor_{os.environ.get('USER', 'root')}"
        dst = os.path.join(out_dir, "inductor")
        os.makedirs(dst, exist_ok=True)
        for i, path in enumerate(p for p in glob.glob(os.path.join(cache, "**", "*.py"), recursive=True)
                                 if "16384" in open(p).read() and "triton_" in open(p).read()):
            shutil.copy(path, os.path.join(dst, f"{i:03d}-{os.path.basename(path)}"))


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else None, smoke)
