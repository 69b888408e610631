"""Session 27: the norm backwards at 4096-wide rows with two rows a tile (ROWS=2), which the autotuner's prune
(kernels._rows._sensible: tiles of at most 4K elements) never offers there: one program an SM of 8 or 16 warps
holds as many rows in flight as the library's two programs of 4 warps, with half the partial rows of dw (db) to
write and sum (explore68: the sum adds 2.2-3.7 us to row kernels of 32.4-33.9).

Run from the repository root: python3 baselines/h200/s27/explore69.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s27/explore69.py --smoke   (CPU: checks only)

Smoke: a few variants against float64 at odd shapes. GPU: every variant against the library (max difference over
max |ref| under 2e-2), then timed by bench.timing (L2 zeroed before each call), three rounds in alternation.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
_spec = importlib.util.spec_from_file_location("explore65", os.path.join(HERE, "..", "s26", "explore65.py"))
E65 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E65)  # emit, inputs, rel

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

VARIANTS = [(128, 2, 8, 3), (128, 2, 8, 1), (128, 2, 16, 3), (132, 2, 8, 3), (256, 2, 8, 3), (256, 2, 4, 3),
            (256, 1, 4, 3)]  # (programs, ROWS, warps, STAGES); the last is the library's config


def launch(norm, dy, x, w, stats, programs, rows, warps, stages):
    n_rows, n_cols = x.shape
    block, single = _rows.row_block(n_cols)
    programs = min(programs, triton.cdiv(n_rows, rows))
    rpp = triton.cdiv(n_rows, programs)
    dx = torch.empty_like(x)
    part = torch.empty(1 if norm == "rmsnorm" else 2, programs, n_cols, dtype=torch.float32, device=x.device)
    if norm == "rmsnorm":
        RN._rmsnorm_bwd_kernel.fn[(programs,)](x, w, dy, stats[0], dx, part, x.stride(0), dy.stride(0), dx.stride(0),
                                               n_rows, n_cols, rpp, BLOCK=block, SINGLE=single, ROWS=rows,
                                               STAGES=stages, num_warps=warps)
    else:
        LN._layernorm_bwd_kernel.fn[(programs,)](x, w, dy, stats[0], stats[1], dx, part[0], part[1], x.stride(0),
                                                 dy.stride(0), dx.stride(0), n_rows, n_cols, rpp, BLOCK=block,
                                                 SINGLE=single, ROWS=rows, STAGES=stages, SPLIT=False,
                                                 num_warps=warps)
    return (dx, *_rows.sum_partials(part, w.dtype))


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        E65.emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
                 sms=_rows.sm_count(torch.device(dev)))
    shapes = [(37, 300), (9, 4000)] if smoke else [(4096, 4096), (16384, 4096)]
    variants = [(5, 2, 4, 3), (3, 2, 4, 1), (4, 1, 4, 3)] if smoke else VARIANTS
    bad = 0
    for rows, dim in shapes:
        x, dy, w, b = E65.inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        stats = {"rmsnorm": (rstd,), "layernorm": (mean, lrstd)}
        if smoke:
            xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
            refs = {"rmsnorm": torch.autograd.grad(xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr,
                                                   (xr, wr), dy.double()),
                    "layernorm": torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5),
                                                     (xr, wr, br), dy.double())}
        else:
            refs = {"rmsnorm": RN.rmsnorm_bwd(dy, x, w, rstd), "layernorm": LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        for p, r, wp, st in variants:
            for norm in ("rmsnorm", "layernorm"):
                calls[(norm, f"P{p} ROWS{r} w{wp} s{st}")] = (
                    lambda norm=norm, p=p, r=r, wp=wp, st=st: launch(norm, dy, x, w, stats[norm], p, r, wp, st))
        for rnd in range(1 if smoke else 3):
            for (norm, name), fn in list(calls.items()):
                if fn is None:
                    continue
                if rnd == 0:
                    try:
                        err = E65.rel(fn(), refs[norm])
                    except Exception as e:  # out of shared memory or registers at some (warps, STAGES)
                        E65.emit(out, kind="error", norm=norm, shape=[rows, dim], variant=name, error=repr(e)[:300])
                        calls[(norm, name)] = None
                        bad += smoke
                        continue
                    bad += err > 2e-2
                    E65.emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer:
                    us = timer(fn) * 1e3
                    E65.emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd,
                             us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
