"""Session 25: cache eviction hints on the single-read loads and the stores of the row kernels, where a goal is
missed at 16M elements (4096 x 4096, 1024 x 16384), with controls at 16384 x 4096 and 16384 x 768.

Run from the repository root: python3 baselines/h200/s25/explore50.py OUT.jsonl [SHAPE ...]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s25/explore50.py --smoke   (CPU: checks only)

bench.timing zeroes a buffer twice the size of L2 before each call, so a timed call starts with L2 full of dirty
lines, and every line it allocates may first write one back. A load marked evict_first (as torch.compile marks
loads read once) makes its line the next to go, so the following loads replace it (clean, nothing to write back)
instead of the dirty ones: fewer write-backs within the call. Each variant here is the library's module
(kernels/rmsnorm.py, layernorm.py, softmax.py) with its source rewritten and imported under another name:

  lib      as committed
  ld       x (dy, y in the backwards) loads that are read once from DRAM: eviction_policy="evict_first"
  cs       the y / dx stores: cache_modifier=".cs" (streaming)
  ld+cs    both
  ld+sf    the loads as ld, the stores eviction_policy="evict_first"

Only tile loads of the form `tl.load(X + rows64 * ...` are rewritten (the passes over 16K-wide rows already carry
their hints; the split layernorm backward's halves are read twice and keep theirs). Each variant's outputs must
equal the library's exactly (the hints change no arithmetic). Floors: `y.copy_(x)` after the usual flush and after
a flush that reads the buffer instead (L2 left clean), and a Triton copy kernel with each hint.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

T0 = time.time()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

VARIANTS = {"lib": (False, None), "ld": (True, None), "cs": (False, 'cache_modifier=".cs"'),
            "ld+cs": (True, 'cache_modifier=".cs"'), "ld+sf": (True, 'eviction_policy="evict_first"')}
LOAD = re.compile(r'(tl\.load\((?:X|DY|Y) \+ rows64 \* stride_\w+ \+ cols\[None, :\], mask=mask, '
                  r'other=(?:0\.0|-float\("inf"\)))\)')
STORE = re.compile(r'(tl\.store\((?:Y|DX) \+ .*?mask=\w+)\)', re.S)
SHAPES = {"4096x4096": (4096, 4096), "1024x16384": (1024, 16384), "16384x4096": (16384, 4096),
          "16384x768": (16384, 768)}
FWD_ONLY = {"16384x4096", "16384x768"}
NORMS_ONLY = {"16384x768"}


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def variant_module(name: str, variant: str, tmp: str):
    """kernels/<name>.py rewritten for `variant`, imported as its own module (its own kernels and autotune
    caches)."""
    load_first, store_hint = VARIANTS[variant]
    src = open(os.path.join(ROOT, "kernels", f"{name}.py")).read()
    n_load = n_store = 0
    if load_first:
        src, n_load = LOAD.subn(r'\1, eviction_policy="evict_first")', src)
    if store_hint:
        src, n_store = STORE.subn(r"\1, " + store_hint + ")", src)
    path = os.path.join(tmp, f"e50_{name}_{variant.replace('+', '_')}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod, n_load, n_store


@triton.jit
def _copy_kernel(X, Y, n_cols, BLOCK: tl.constexpr, LD: tl.constexpr, ST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    if LD:
        x = tl.load(X + row * n_cols + cols, mask=ok, eviction_policy="evict_first")
    else:
        x = tl.load(X + row * n_cols + cols, mask=ok)
    if ST == 1:
        tl.store(Y + row * n_cols + cols, x, mask=ok, cache_modifier=".cs")
    elif ST == 2:
        tl.store(Y + row * n_cols + cols, x, mask=ok, eviction_policy="evict_first")
    else:
        tl.store(Y + row * n_cols + cols, x, mask=ok)


def triton_copy(x, y, ld, st):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _copy_kernel[(rows,)](x, y, cols, BLOCK=block, LD=ld, ST=st, num_warps=max(1, min(16, block // 512)))


def calls_for(mods, x, w, b, dy, smoke):
    """{op: {variant: fn}} for one shape: each fn returns the outputs to compare."""
    rn, ln, sm = (mods["rmsnorm"], mods["layernorm"], mods["softmax"])
    _, rstd = rn["lib"].rmsnorm_fwd(x, w)
    _, mean, lrstd = ln["lib"].layernorm_fwd(x, w, b)
    y = sm["lib"].softmax_fwd(x)
    return {
        "rmsnorm fwd": {v: (lambda m=m: (m.rmsnorm_fwd(x, w, stats=False)[0],)) for v, m in rn.items()},
        "layernorm fwd": {v: (lambda m=m: (m.layernorm_fwd(x, w, b, stats=False)[0],)) for v, m in ln.items()},
        "softmax fwd": {v: (lambda m=m: (m.softmax_fwd(x),)) for v, m in sm.items()},
        "rmsnorm bwd": {v: (lambda m=m: m.rmsnorm_bwd(dy, x, w, rstd)) for v, m in rn.items()},
        "layernorm bwd": {v: (lambda m=m: m.layernorm_bwd(dy, x, w, mean, lrstd)) for v, m in ln.items()},
        "softmax bwd": {v: (lambda m=m: (m.softmax_bwd(dy, y),)) for v, m in sm.items()},
    }


def main(path, smoke, only):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    tmp = tempfile.mkdtemp(prefix="e50_")
    mods = {}
    for name in ("rmsnorm", "layernorm", "softmax"):
        mods[name] = {}
        for v in VARIANTS:
            mods[name][v], n_load, n_store = variant_module(name, v, tmp)
            emit(out, kind="rewrite", module=name, variant=v, loads=n_load, stores=n_store)
    shapes = {"37x300": (37, 300), "3x5000": (3, 5000)} if smoke else {k: SHAPES[k] for k in (only or SHAPES)}
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
    bad = 0
    for label, (rows, dim) in shapes.items():
        g = torch.Generator(device=dev).manual_seed(0)
        x = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        ops = calls_for(mods, x, w, b, dy, smoke)
        if label in FWD_ONLY:
            ops = {k: v for k, v in ops.items() if k.endswith("fwd")}
        if label in NORMS_ONLY:
            ops = {k: v for k, v in ops.items() if not k.startswith("softmax")}
        for op, fns in ops.items():
            ref = fns["lib"]()
            for v, fn in fns.items():
                got = fn()
                same = all(torch.equal(a, r) for a, r in zip(got, ref))
                bad += not same
                emit(out, kind="check", op=op, shape=label, variant=v, same=same)
        y = torch.empty_like(x)
        if smoke:
            for ld in (0, 1):
                for st in (0, 1, 2):
                    y.zero_()
                    triton_copy(x, y, ld, st)
                    bad += not torch.equal(y, x)
                    emit(out, kind="check", op=f"triton copy ld{ld} st{st}", shape=label, same=torch.equal(y, x))
            continue
        floors = {"torch copy": lambda: y.copy_(x)}
        for ld in (0, 1):
            for st in (0, 1, 2):
                floors[f"triton copy ld{ld} st{st}"] = lambda ld=ld, st=st: triton_copy(x, y, ld, st)
        for rnd in range(2):
            for name, fn in floors.items():
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="floor", shape=label, op=name, round=rnd, us=round(us, 2))
            for op, fns in ops.items():
                for v, fn in fns.items():
                    us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                    emit(out, kind="time", shape=label, op=op, variant=v, round=rnd, us=round(us, 2))
        # the copy after a flush that reads the buffer: L2 left clean, the write-backs' cost gone
        flusher = BT.l2_flusher(torch.cuda.current_device())
        zero = type(flusher).__call__
        type(flusher).__call__ = lambda self: self.buf.sum()
        try:
            for name in ("torch copy", "triton copy ld0 st0", "triton copy ld1 st0"):
                us = BT.time_cuda(floors[name], cfg).summary()["median_ms"] * 1e3
                emit(out, kind="floor-readflush", shape=label, op=name, us=round(us, 2))
        finally:
            type(flusher).__call__ = zero
    if bad:
        raise SystemExit(f"{bad} variants differ from the library")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke, args[1:] if not smoke else None)
