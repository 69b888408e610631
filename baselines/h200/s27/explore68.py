"""Session 27: the norm backwards' partial-row sum (kernels._rows.sum_partials), its tile shape.

Each norm backward is the row kernel plus a second kernel, launched as a programmatic dependent, summing the
[k, programs, dim] fp32 partial rows over programs. The library's tiles: 32 columns x 256 partial rows at 8 warps
where there are 256 partial rows or more (4096 x 4096: 256), 64 x 64 at 4 warps below (1024 x 16384: 128, two
steps a program). Here the row kernel alone (the library's, autotuned, its partials left unsummed) and the whole
backward with other tiles (columns a program, partial rows a step, warps), at the points where 70% of the copy
bandwidth is missed (rmsnorm 4096 x 4096 34.3 us and 1024 x 16384 35.1 in the bench at e3591b3, 70% 33.6;
layernorm 4096 x 4096 36.8).

Run from the repository root: python3 baselines/h200/s27/explore68.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s27/explore68.py --smoke   (CPU: checks only)

Smoke: every tile against float64 at odd shapes. GPU: against the library (max difference over max |ref| under
2e-2), then timed by bench.timing (L2 zeroed before each call), three rounds in alternation.
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

TILES = {256: [(32, 256, 8), (16, 256, 4), (16, 256, 8), (32, 256, 4), (64, 256, 8), (32, 128, 4), (64, 128, 8),
               (128, 64, 4)],
         128: [(64, 64, 4), (32, 128, 4), (32, 128, 8), (16, 128, 4), (64, 128, 8), (128, 32, 4), (64, 64, 8)]}


def rows_only(norm, dy, x, w, stats):
    """The library's row kernel (autotuned) alone: dx and the unsummed partial rows."""
    x2, dy2 = x, dy
    n_rows, n_cols = x2.shape
    dx = torch.empty_like(x2)
    block, single = _rows.row_block(n_cols)
    split = norm == "layernorm" and _rows.split_columns(block, single)
    programs, rpp = _rows.reduction_programs(n_rows, block, x.device, split=split)
    part = torch.empty(1 if norm == "rmsnorm" else 2, programs, n_cols, dtype=torch.float32, device=x.device)
    if norm == "rmsnorm":
        RN._rmsnorm_bwd_kernel[(programs,)](x2, w, dy2, stats[0], dx, part, x2.stride(0), dy2.stride(0),
                                            dx.stride(0), n_rows, n_cols, rpp, BLOCK=block, SINGLE=single)
    else:
        LN._layernorm_bwd_kernel[(2 * programs if split else programs,)](
            x2, w, dy2, stats[0], stats[1], dx, part[0], part[1], x2.stride(0), dy2.stride(0), dx.stride(0), n_rows,
            n_cols, rpp, BLOCK=block, SINGLE=single, SPLIT=split)
    return dx, part


def with_tile(norm, dy, x, w, stats, bn, bp, warps):
    dx, part = rows_only(norm, dy, x, w, stats)
    k, n_programs, n_cols = part.shape
    out = torch.empty(k, n_cols, dtype=w.dtype, device=x.device)
    bn = min(bn, triton.next_power_of_2(n_cols))
    _rows._sum_partials_kernel[(triton.cdiv(n_cols, bn), k)](part, out, n_programs, n_cols, BN=bn, BP=bp,
                                                              num_warps=warps, **_rows.dependent_kwargs(x.device))
    return (dx, *out)


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
    points = ([("rmsnorm", 37, 300), ("layernorm", 37, 300), ("rmsnorm", 700, 4000)] if smoke else
              [("rmsnorm", 4096, 4096), ("layernorm", 4096, 4096), ("rmsnorm", 1024, 16384)])
    bad = 0
    for norm, rows, dim in points:
        x, dy, w, b = E65.inputs(rows, dim, dev)
        if norm == "rmsnorm":
            _, rstd = RN.rmsnorm_fwd(x, w)
            stats = (rstd,)
            lib = lambda: RN.rmsnorm_bwd(dy, x, w, rstd)  # noqa: E731
        else:
            _, mean, lrstd = LN.layernorm_fwd(x, w, b)
            stats = (mean, lrstd)
            lib = lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)  # noqa: E731
        if smoke:
            xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
            y = (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr if norm == "rmsnorm" else
                 torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5))
            ref = torch.autograd.grad(y, (xr, wr) if norm == "rmsnorm" else (xr, wr, br), dy.double())
        else:
            ref = lib()
        programs = rows_only(norm, dy, x, w, stats)[1].shape[1]
        tiles = TILES.get(programs, TILES[256] if programs >= 256 else TILES[128])
        calls = {"lib": lib, "rows only": lambda: rows_only(norm, dy, x, w, stats)}
        for bn, bp, wp in tiles:
            calls[f"BN{bn} BP{bp} w{wp}"] = lambda bn=bn, bp=bp, wp=wp: with_tile(norm, dy, x, w, stats, bn, bp, wp)
        for rnd in range(1 if smoke else 3):
            for name, fn in list(calls.items()):
                if fn is None:
                    continue
                if rnd == 0 and name != "rows only":
                    try:
                        err = E65.rel(fn(), ref)
                    except Exception as e:  # out of registers at some tile
                        E65.emit(out, kind="error", norm=norm, shape=[rows, dim], variant=name, error=repr(e)[:300])
                        calls[name] = None
                        bad += smoke
                        continue
                    bad += err > 2e-2
                    E65.emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, programs=programs,
                             err=err, ok=err <= 2e-2)
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
