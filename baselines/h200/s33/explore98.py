"""Session 33: the norm backwards with their dependents (the partial-row sum, a programmatic dependent launch)
allowed to launch before the backward kernel ends.

The library launches sum_partials as a dependent that waits in gdc_wait, but the backward kernel never calls
gdc_launch_dependents, so the dependent is launched only as the kernel's programs exit. Here copies of the
library's paths (rmsnorm's whole-row loop, layernorm's whole-row loop and its split half rows) call it after their
row loop, before storing their partial rows (TRIGGER 2, not layernorm's split), or at their start (TRIGGER 1,
which session 23 found slower at 16K-wide rows), or not at all (TRIGGER 0, the library's kernel as it is), each
at the config the autotuner picks for the library (explore96), then the library's sum_partials. Checked against
the library, then timed by bench.timing beside it, three rounds in alternation.

Run from the repository root: python3 baselines/h200/s33/explore98.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s33/explore98.py --offline   (no GPU: compiles for sm_90a)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import reduction_programs, row_block, split_columns, sum_partials  # noqa: E402


@triton.jit
def _rms_bwd(X, W, DY, RSTD, DX, DW_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
             BLOCK: tl.constexpr, STAGES: tl.constexpr, TRIGGER: tl.constexpr):
    """rmsnorm's whole-row loop (ROWS 1) of _rmsnorm_bwd_kernel."""
    if TRIGGER == 1:
        gdc_launch_dependents()
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in tl.range(pid, n_rows, tl.num_programs(0), num_stages=STAGES):
        row64 = row.to(tl.int64)
        rstd = tl.load(RSTD + row)
        xhat = tl.load(X + row64 * stride_x + cols, mask=col_ok, other=0.0).to(tl.float32) * rstd
        dy = tl.load(DY + row64 * stride_dy + cols, mask=col_ok, other=0.0).to(tl.float32)
        dw += dy * xhat
        g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
        c = tl.sum(g * xhat, axis=0) / n_cols
        tl.store(DX + row64 * stride_dx + cols, (rstd * (g - xhat * c)).to(DX.dtype.element_ty), mask=col_ok)
    if TRIGGER == 2:
        gdc_launch_dependents()
    tl.store(DW_PARTIAL + pid.to(tl.int64) * n_cols + cols, dw, mask=col_ok)


@triton.jit
def _ln_bwd(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols,
            rows_per_program, BLOCK: tl.constexpr, STAGES: tl.constexpr, SPLIT: tl.constexpr,
            TRIGGER: tl.constexpr):
    """layernorm's whole-row loop (ROWS 1) of _layernorm_bwd_kernel, or with SPLIT its _layernorm_bwd_half (which
    stores its partial rows itself, so TRIGGER 2 does not apply)."""
    if TRIGGER == 1:
        gdc_launch_dependents()
    pid = tl.program_id(0) // 2 if SPLIT else tl.program_id(0)
    dw_ptr = DW_PARTIAL + pid.to(tl.int64) * n_cols
    db_ptr = DB_PARTIAL + pid.to(tl.int64) * n_cols
    if SPLIT:
        first = pid * rows_per_program
        last = tl.minimum(first + rows_per_program, n_rows)
        LN._layernorm_bwd_half(X, W, DY, MEAN, RSTD, DX, dw_ptr, db_ptr, stride_x, stride_dy, stride_dx, first,
                               last, n_cols, tl.program_id(0) % 2, BLOCK // 2, STAGES)  # stores its partials
    else:
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n_cols
        dw = tl.zeros([BLOCK], dtype=tl.float32)
        db = tl.zeros([BLOCK], dtype=tl.float32)
        for row in tl.range(pid, n_rows, tl.num_programs(0), num_stages=STAGES):
            row64 = row.to(tl.int64)
            rstd = tl.load(RSTD + row)
            shift = tl.load(MEAN + row) * rstd
            xhat = tl.load(X + row64 * stride_x + cols, mask=col_ok, other=0.0).to(tl.float32) * rstd - shift
            dy = tl.load(DY + row64 * stride_dy + cols, mask=col_ok, other=0.0).to(tl.float32)
            dw += dy * xhat
            db += dy
            g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
            c1 = tl.sum(g, axis=0) / n_cols
            c2 = tl.sum(g * xhat, axis=0) / n_cols
            dx = rstd * (g - c1 - xhat * c2)
            tl.store(DX + row64 * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=col_ok)
        if TRIGGER == 2:
            gdc_launch_dependents()
        tl.store(dw_ptr + cols, dw, mask=col_ok)
        tl.store(db_ptr + cols, db, mask=col_ok)


def rms(dy, x, w, rstd, warps, stages, trigger):
    n_rows, n_cols = x.shape
    block, _ = row_block(n_cols)
    programs, _ = reduction_programs(n_rows, block, x.device)
    dx = torch.empty_like(x)
    partials = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)
    _rms_bwd[(programs,)](x, w, dy, rstd, dx, partials, x.stride(0), dy.stride(0), dx.stride(0), n_rows, n_cols,
                          BLOCK=block, STAGES=stages, TRIGGER=trigger, num_warps=warps)
    return dx, sum_partials(partials, w.dtype)[0]


def ln(dy, x, w, mean, rstd, warps, stages, trigger):
    n_rows, n_cols = x.shape
    block, single = row_block(n_cols)
    split = split_columns(block, single)
    programs, per = reduction_programs(n_rows, block, x.device, split)
    dx = torch.empty_like(x)
    partials = torch.empty(2, programs, n_cols, dtype=torch.float32, device=x.device)
    _ln_bwd[(programs * (2 if split else 1),)](x, w, dy, mean, rstd, dx, partials[0], partials[1], x.stride(0),
                                               dy.stride(0), dx.stride(0), n_rows, n_cols, per, BLOCK=block,
                                               STAGES=stages, SPLIT=split, TRIGGER=trigger, num_warps=warps)
    return (dx, *sum_partials(partials, w.dtype))


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def offline():
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    rms_sig = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "RSTD": "*fp32", "DX": "*bf16", "DW_PARTIAL": "*fp32",
               "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "n_rows": "i32", "n_cols": "constexpr",
               "BLOCK": "constexpr", "STAGES": "constexpr", "TRIGGER": "constexpr"}
    ln_sig = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "MEAN": "*fp32", "RSTD": "*fp32", "DX": "*bf16",
              "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32",
              "n_rows": "i32", "n_cols": "i32", "rows_per_program": "i32", "BLOCK": "constexpr",
              "STAGES": "constexpr", "SPLIT": "constexpr", "TRIGGER": "constexpr"}
    print(f"triton {triton.__version__}, sm_90a")
    for trigger in (0, 1, 2):
        for dim, warps in ((4096, 4), (16384, 16)):
            k = triton.compile(ASTSource(fn=_rms_bwd, signature=rms_sig, constexprs={
                "n_cols": dim, "BLOCK": dim, "STAGES": 3, "TRIGGER": trigger}), target=target,
                options={"num_warps": warps})
            print(f"rmsnorm {dim}, trigger {trigger}: griddepcontrol.launch_dependents in the PTX:",
                  "griddepcontrol.launch_dependents" in k.asm["ptx"], "cp.async:", "cp.async" in k.asm["ptx"])
        for block, split, warps in ((4096, False, 4), (16384, True, 8)):
            k = triton.compile(ASTSource(fn=_ln_bwd, signature=ln_sig, constexprs={
                "BLOCK": block, "STAGES": 3, "SPLIT": split, "TRIGGER": trigger}), target=target,
                options={"num_warps": warps})
            print(f"layernorm {block}{' split' if split else ''}, trigger {trigger}: launch_dependents:",
                  "griddepcontrol.launch_dependents" in k.asm["ptx"], "cp.async:", "cp.async" in k.asm["ptx"])


def main(path):
    out = open(path, "w")
    dev = "cuda"
    set_benchmark(autotune_bench)  # as bench's worker does
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    picks = {(4096, 4096): {"rmsnorm": (4, 3), "layernorm": (4, 3)},  # (warps, STAGES): explore96's library picks
             (1024, 16384): {"rmsnorm": (16, 3), "layernorm": (8, 3)}}
    for (rows, dim), pick in picks.items():
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        lib = {"rmsnorm": lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
               "layernorm": lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        calls = {}
        for name in ("rmsnorm", "layernorm"):
            want = [t.double() for t in lib[name]()]
            calls[f"{name} library"] = lib[name]
            warps, stages = pick[name]
            for trigger in ((0, 1) if name == "layernorm" and dim > 8192 else (0, 1, 2)):
                fn = ((lambda trigger=trigger: rms(dy, x, w, rstd, warps, stages, trigger)) if name == "rmsnorm" else
                      (lambda trigger=trigger: ln(dy, x, w, mean, lrstd, warps, stages, trigger)))
                label = f"{name} copy, {warps} warps, STAGES {stages}, TRIGGER {trigger}"
                got = fn()
                diff = max(float((a.double() - r).abs().max() / r.abs().max().clamp_min(1e-30))
                           for a, r in zip(got, want))
                emit(out, kind="check", shape=[rows, dim], call=label, rel_diff_from_library=diff)
                calls[label] = fn
        for rnd in range(3):
            for name, fn in calls.items():
                t = time_call(fn, dev, TimingConfig())
                s = t.summary()
                emit(out, kind="time", round=rnd, shape=[rows, dim], call=name,
                     median_us=round(s["median_ms"] * 1e3, 3), n=s["n"], method=t.method)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main([a for a in sys.argv[1:] if not a.startswith("--")][0])
