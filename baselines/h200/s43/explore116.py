"""Session 43: the norm backwards with their per-program partial rows of dw (and db) stored in bf16 instead of
fp32, where w is bf16 (dw is rounded to bf16 at the end either way).

explore110 (session 40) put the partial rows at 0.8 us (their store) plus 2.1-2.5 us (their sum) of rmsnorm's
4096 x 4096 backward and 2.0 plus 3.8 us at 1024 x 16384; 70% of bandwidth there is 33.6 us, and the library takes
34.2-35.6. Stored in bf16 they are half the bytes (4 MiB instead of 8 at 4096 x 4096 for layernorm's dw and db,
4.1 instead of 8.3 at 1024 x 16384 for rmsnorm's dw), at the cost of one more bf16 rounding of each partial
before the sum. Nothing else changes: the library's own row kernels and partial-row sum are launched, only the
partial-row buffer's dtype (and, in the `-pN` variants, the program count) differs. Timed by bench.timing, three
rounds in alternation, bf16:
  lib          the library's whole backward (fp32 partial rows)
  bf16         the same launches with bf16 partial rows, at the library's program count
  bf16-pN      the same at N programs (4096-wide rows: more programs cost fewer partial-row bytes now)
  fp32-pN      the library's fp32 partial rows at N programs
  add          torch.add(x, dy, out=dx): an elementwise kernel of nearly the same bytes
Checks, each after the first call and again after the timed rounds, dx first filled with NaN (the grads are new
tensors each call): dx against the library's (bit-equal where the autotuner took the same config); dw (db) against
float64 as the largest difference over the largest |reference| (ok within 2^-6) and as the relative
root-mean-square error, both beside the library's.

Run from the repository root: python3 baselines/h200/s43/explore116.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s43/explore116.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, emit, norm_inputs, timed_rounds  # noqa: E402

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

POINTS = [("rmsnorm", 4096, 4096), ("rmsnorm", 1024, 16384), ("layernorm", 4096, 4096), ("layernorm", 1024, 16384),
          ("rmsnorm", 16384, 4096), ("rmsnorm", 65536, 768), ("layernorm", 16384, 4096)]
MORE_PROGRAMS = {4096: (396, 528)}  # program counts tried beside the library's, by row length


def errors(got: torch.Tensor, ref: torch.Tensor) -> list[float]:
    """[largest |got - ref| over largest |ref|, ||got - ref|| / ||ref||]; NaN if got holds a NaN."""
    d = got.double() - ref
    return [(d.abs().max() / ref.abs().max()).item(), (d.norm() / ref.norm()).item()]


def launcher(norm, x, dy, w, stats, dx, programs, pdtype):
    """The library's backward launch (rmsnorm_bwd / layernorm_bwd) with `programs` programs and partial rows of
    `pdtype`; returns the grads."""
    rows, dim = x.shape
    block, single = _rows.row_block(dim)
    assert single, "rows that fit a block only (longer rows accumulate their partial rows in place)"
    layer = norm == "layernorm"
    split = layer and _rows.split_columns(block, single)
    rpp = triton.cdiv(rows, programs)
    programs = triton.cdiv(rows, rpp)
    partials = torch.empty(2 if layer else 1, programs, dim, dtype=pdtype, device=x.device)

    def call():
        if layer:
            mean, rstd = stats
            LN._layernorm_bwd_kernel[(programs * (2 if split else 1),)](
                x, w, dy, mean, rstd, dx, partials[0], partials[1], x.stride(0), dy.stride(0), dx.stride(0), rows,
                dim, rpp, BLOCK=block, SINGLE=single, SPLIT=split)
        else:
            RN._rmsnorm_bwd_kernel[(programs,)](x, w, dy, stats[0], dx, partials[0], x.stride(0), dy.stride(0),
                                                dx.stride(0), rows, dim, rpp, BLOCK=block, SINGLE=single)
        return list(_rows.sum_partials(partials, w.dtype))
    return call, programs


def point(norm, rows, dim, dev, out, calls, checks):
    x, dy, w, b = norm_inputs(rows, dim, dev)
    layer = norm == "layernorm"
    if layer:
        _, mean, rstd = LN.layernorm_fwd(x, w, b)
        stats = (mean, rstd)
        xhat = (x.double() - mean.double()[:, None]) * rstd.double()[:, None]
        lib = lambda: LN.layernorm_bwd(dy, x, w, mean, rstd)  # noqa: E731
        kern = LN._layernorm_bwd_kernel
    else:
        _, rstd = RN.rmsnorm_fwd(x, w)
        stats = (rstd,)
        xhat = x.double() * rstd.double()[:, None]
        lib = lambda: RN.rmsnorm_bwd(dy, x, w, rstd)  # noqa: E731
        kern = RN._rmsnorm_bwd_kernel
    refs = [(dy.double() * xhat).sum(0)] + ([dy.double().sum(0)] if layer else [])
    del xhat
    lib_dx, *lib_grads = lib()
    lib_cfg = str(kern.best_config)
    emit(out, kind="check", norm=norm, shape=[rows, dim], impl="lib", config=lib_cfg,
         grad_err=[errors(g, r) for g, r in zip(lib_grads, refs)])
    block, single = _rows.row_block(dim)
    split = layer and _rows.split_columns(block, single)
    base = _rows.reduction_programs(rows, block, x.device, split)[0]
    dx = torch.empty_like(x)
    variants = {}
    for n in (base,) + MORE_PROGRAMS.get(dim, ()):
        for pdtype, tag in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
            if n == base and tag == "fp32":
                continue  # the library's own launch
            fn, n_real = launcher(norm, x, dy, w, stats, dx, n, pdtype)
            variants[tag if n == base else f"{tag}-p{n_real}"] = fn

    def check(name, fn, stage):
        dx.fill_(float("nan"))
        got = fn()
        cfg = str(kern.best_config)
        errs = [errors(g, r) for g, r in zip(got, refs)]
        ok = all(e[0] <= 2 ** -6 for e in errs) and not bool(dx.isnan().any())
        emit(out, kind="check", stage=stage, norm=norm, shape=[rows, dim], impl=name, config=cfg, ok=ok,
             dx_equal=bool(torch.equal(dx, lib_dx)), same_config=cfg == lib_cfg, grad_err=errs)

    key = (norm, rows, dim)
    calls[key + ("lib",)] = lib
    for name, fn in variants.items():
        check(name, fn, "first")
        calls[key + (name,)] = fn
        checks.append(lambda name=name, fn=fn: check(name, fn, "after timing"))
    out_add = torch.empty_like(x)
    calls[key + ("add",)] = lambda: torch.add(x, dy, out=out_add)


def main(path, smoke):
    out, dev = begin(path, smoke)
    points = [("rmsnorm", 8, 64), ("layernorm", 37, 300)] if smoke else POINTS
    calls, checks = {}, []
    for norm, rows, dim in points:
        point(norm, rows, dim, dev, out, calls, checks)
    for fn in calls.values():
        fn()
    if not smoke:
        timed_rounds(out, calls, dev, fields=lambda k: {"norm": k[0], "shape": [k[1], k[2]], "impl": k[3]})
    for fn in checks:
        fn()
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else None, "--smoke" in sys.argv)
