"""Session 25: the norm backwards' one-program loop (rows that fit a block) with w loaded once a program, before
the row loop, instead of from L1 every step (`wonce`). At 4096-wide rows the grid is about two programs an SM of
4 warps, so registers are not what bounds residency there: w's 32 values a thread can stay in registers (at
16K-wide rows, 32 warps at 64 registers a thread, they may spill instead).

Run from the repository root: python3 baselines/h200/s25/explore53.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s25/explore53.py --smoke   (CPU: checks only)

Each variant is kernels/rmsnorm.py or kernels/layernorm.py with its source rewritten and imported under another
name; dx, dw (db) checked against float64 at odd shapes and against the library at the timed shapes, then the
whole backward timed by bench.timing (L2 zeroed before each call), three rounds alternating.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time

import torch

T0 = time.time()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

WONCE = [
    ("        dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)\n",
     "        dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)\n"
     "        w_once = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)\n"),
    ("g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]  # w from L1 each step",
     "g = dy * w_once[None, :]"),
]
SHAPES = [(4096, 4096), (1024, 4096), (16384, 4096), (16384, 768), (1024, 16384)]


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def variant(tmp, module, rewrites):
    src = open(os.path.join(ROOT, "kernels", f"{module}.py")).read()
    for old, new in rewrites:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    mod_name = f"e53_{module}_wonce"
    path = os.path.join(tmp, mod_name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def inputs(rows, dim, dev):
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
    dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    return x, dy, w, b


def reference(norm, x, dy, w, b):
    x, dy, w, b = (t.double().requires_grad_() for t in (x, dy, w, b))
    if norm == "rmsnorm":
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        return torch.autograd.grad(y, (x, w), dy)
    y = torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, 1e-5)
    return torch.autograd.grad(y, (x, w, b), dy)


def backward(norm, m, x, dy, w, b):
    """The library's backward call for `norm` in module m, its forward's stats made by m too."""
    if norm == "rmsnorm":
        _, rstd = m.rmsnorm_fwd(x, w)
        return lambda: m.rmsnorm_bwd(dy, x, w, rstd)
    _, mean, rstd = m.layernorm_fwd(x, w, b)
    return lambda: m.layernorm_bwd(dy, x, w, mean, rstd)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    from kernels import layernorm, rmsnorm
    tmp = tempfile.mkdtemp(prefix="e53_")
    mods = {norm: {"lib": lib, "wonce": variant(tmp, norm, WONCE)}
            for norm, lib in (("rmsnorm", rmsnorm), ("layernorm", layernorm))}
    bad = 0
    for rows, dim in [(37, 300), (3, 5000)] if smoke else [(37, 300), (1000, 5000), (64, 16383)]:
        x, dy, w, b = inputs(rows, dim, dev)
        for norm, variants in mods.items():
            ref = reference(norm, x, dy, w, b)
            for name, m in variants.items():
                got = backward(norm, m, x, dy, w, b)()
                errs = [float((a.double() - r).abs().max() / r.abs().max()) for a, r in zip(got, ref)]
                ok = max(errs) <= 2e-2
                bad += not ok
                emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name,
                     errs=[round(e, 6) for e in errs], ok=ok)
    if smoke:
        if bad:
            raise SystemExit(f"{bad} checks off")
        return
    import bench.timing as BT
    cfg = BT.TimingConfig()
    for rows, dim in SHAPES:
        x, dy, w, b = inputs(rows, dim, dev)
        for norm, variants in mods.items():
            calls = {name: backward(norm, m, x, dy, w, b) for name, m in variants.items()}
            ref, got = calls["lib"](), calls["wonce"]()
            diff = max(float((a.double() - r.double()).abs().max() / r.double().abs().max())
                       for a, r in zip(got, ref))
            emit(out, kind="vs-lib", norm=norm, shape=[rows, dim], max_rel_diff=diff)
            for rnd in range(3):
                for name, fn in calls.items():
                    us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                    emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} checks off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
