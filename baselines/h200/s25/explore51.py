"""Session 25: layernorm's backward without the selects that zero xhat outside the row (kernels/layernorm.py,
_layernorm_bwd_half and the one-program loop). Those lanes load dy = 0, so every term they feed (dy * xhat,
dy, g = dy * w, g * xhat) is already zero and dx there is not stored: the selects are instructions a lane spends
for nothing, in a kernel that issues rather than waits (ncu, session 21: an instruction every 3.3 cycles a warp,
DRAM 48-53% busy).

Run from the repository root: python3 baselines/h200/s25/explore51.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s25/explore51.py --smoke   (CPU: checks only)

Variants: `lib` (kernels/layernorm.py as committed), `nowhere` (the module's source with those three selects
removed, imported under another name) and `nowhere+fma` (see FMA). Checked: each variant's dx, dw, db against
float64 (relative to the largest |ref|) at odd shapes with masked lanes, and against the library's at the timed
shapes; then timed by bench.timing (L2 zeroed before each call), three rounds alternating.
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

REWRITES = [
    ("xo = tl.where(other_ok, (tl.load(x_row + other, mask=other_ok, other=0.0).to(tl.float32) - mean) * rstd, 0.0)",
     "xo = (tl.load(x_row + other, mask=other_ok, other=0.0).to(tl.float32) - mean) * rstd"),
    ("xhat = tl.where(own_ok, (tl.load(x_row + own, mask=own_ok, other=0.0).to(tl.float32) - mean) * rstd, 0.0)",
     "xhat = (tl.load(x_row + own, mask=own_ok, other=0.0).to(tl.float32) - mean) * rstd"),
    ("xhat = tl.where(mask, (tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0)\n"
     "                                   .to(tl.float32) - mean[:, None]) * rstd[:, None], 0.0)",
     "xhat = (tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0)\n"
     "                    .to(tl.float32) - mean[:, None]) * rstd[:, None]"),
]


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


# nowhere+fma: also xhat as one FMA an element, x * rstd - mean * rstd (mean * rstd once a row), instead of a
# subtraction and a product; it rounds differently when |mean| is large against the row's spread (checked here on
# rows of mean 0.5, spread 1, only)
FMA = [
    ("        rstd = tl.load(RSTD + row)\n", "        rstd = tl.load(RSTD + row)\n        mr = mean * rstd\n"),
    ("xo = (tl.load(x_row + other, mask=other_ok, other=0.0).to(tl.float32) - mean) * rstd",
     "xo = tl.load(x_row + other, mask=other_ok, other=0.0).to(tl.float32) * rstd - mr"),
    ("xhat = (tl.load(x_row + own, mask=own_ok, other=0.0).to(tl.float32) - mean) * rstd",
     "xhat = tl.load(x_row + own, mask=own_ok, other=0.0).to(tl.float32) * rstd - mr"),
    ("            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)\n            xhat",
     "            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)\n            mr = mean * rstd\n            xhat"),
    ("xhat = (tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0)\n"
     "                    .to(tl.float32) - mean[:, None]) * rstd[:, None]",
     "xhat = (tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0)\n"
     "                    .to(tl.float32) * rstd[:, None] - mr[:, None])"),
]


def variant(tmp, name, rewrites):
    src = open(os.path.join(ROOT, "kernels", "layernorm.py")).read()
    for old, new in rewrites:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    mod_name = "e51_layernorm_" + name.replace("+", "_")
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


def reference(x, dy, w, b):
    x, dy, w, b = (t.double().requires_grad_() for t in (x, dy, w, b))
    y = torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, 1e-5)
    return torch.autograd.grad(y, (x, w, b), dy)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    from kernels import _rows
    from kernels import layernorm as lib
    tmp = tempfile.mkdtemp(prefix="e51_")
    mods = {"lib": lib, "nowhere": variant(tmp, "nowhere", REWRITES),
            "nowhere+fma": variant(tmp, "nowhere+fma", REWRITES + FMA)}
    bad = 0
    # odd shapes: masked lanes in the one-program loop (300, 5000) and in the split halves (16000 < 16384)
    checks = [(37, 300), (3, 5000)] + ([(5, 16000)] if smoke else [(37, 16000), (1000, 5000), (64, 16383)])
    for rows, dim in checks:
        x, dy, w, b = inputs(rows, dim, dev)
        ref = reference(x, dy, w, b)
        for name, m in mods.items():
            _, mean, rstd = m.layernorm_fwd(x, w, b)
            got = m.layernorm_bwd(dy, x, w, mean, rstd)
            errs = [float((a.double() - r).abs().max() / r.abs().max()) for a, r in zip(got, ref)]
            ok = max(errs) <= 2e-2
            bad += not ok
            emit(out, kind="check", shape=[rows, dim], variant=name, split=_rows.split_columns(
                *_rows.row_block(dim)), errs=[round(e, 6) for e in errs], ok=ok)
    if smoke:
        if bad:
            raise SystemExit(f"{bad} checks off")
        return
    import bench.timing as BT
    cfg = BT.TimingConfig()
    for rows, dim in [(4096, 16384), (1024, 16384), (16384, 16384), (4096, 4096)]:
        x, dy, w, b = inputs(rows, dim, dev)
        calls = {}
        for name, m in mods.items():
            _, mean, rstd = m.layernorm_fwd(x, w, b)
            calls[name] = (lambda m=m, mean=mean, rstd=rstd: m.layernorm_bwd(dy, x, w, mean, rstd))
        ref = calls["lib"]()
        for name in ("nowhere", "nowhere+fma"):
            got = calls[name]()
            diff = max(float((a.double() - r.double()).abs().max() / r.double().abs().max())
                       for a, r in zip(got, ref))
            emit(out, kind="vs-lib", shape=[rows, dim], variant=name, max_rel_diff=diff)
        for rnd in range(3):
            for name, fn in calls.items():
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} checks off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
