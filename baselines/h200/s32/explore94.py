"""Session 32 (for the next session's device time): rows spread over a cluster of CTAs (Triton's num_ctas on Hopper).

With num_ctas = C, Triton lays a program's tensors over a cluster of C CTAs, one an SM, and reduces across them
through distributed shared memory (read offline, sm_90, Triton 3.9: `.reqnctapercluster`, `mapa` +
`ld.shared::cluster`; tl.program_id and tl.num_programs still count programs). So one long row can be held in
the registers of several SMs and read once:

- softmax, one program a row, the whole row in registers over the cluster (max, sum of exp, output), against the
  library, which reads rows longer than 16K twice (256 x 65536: 25.7 us, 64 x 262144 split in two kernels: 31.0;
  a copy of the same bytes 20.0-20.3; explore87 held a 64K row in one CTA: 37.3);
- the norm backwards at 16K-wide rows with the whole row a step over 2 CTAs (the library's unsplit path, launched
  with num_ctas=2), where layernorm's library kernel gives each row range two programs that each read the whole
  row (its `_layernorm_bwd_half`), and rmsnorm's one program an SM walks whole rows alone.

Compiled offline (Triton 3.9, sm_90a, its ptxas; the device has Triton 3.6): the softmax rows took 32-95 registers
and spilled nothing (65536 wide over 4 CTAs at 16 warps: 50); layernorm's whole-row backward at 16 warps, 128
registers and 296 B spilled on one CTA (212 B pipelined, hence the library's split), 123-126 and none over 2 CTAs
(pipelined: 98 KB of shared memory against 197 KB); rmsnorm's 64-78 over 2 CTAs against 128 on one.

Each variant is checked (softmax against float64, the backwards against the library's dx, dw, db), its compiled
registers and spills recorded, then timed by bench.timing beside the library, three rounds in alternation.

Run from the repository root: python3 baselines/h200/s32/explore94.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s32/explore94.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton
import triton.language as tl

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import reduction_programs, row_block, split_columns, sum_partials  # noqa: E402


@triton.jit
def _softmax_row(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    """One row a program, whole, in registers (over the program's cluster when num_ctas > 1)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * stride_y + cols, (e * (1.0 / tl.sum(e, axis=0))).to(Y.dtype.element_ty), mask=ok)


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def compiled(handle) -> dict:
    return {"n_regs": getattr(handle, "n_regs", None), "n_spills": getattr(handle, "n_spills", None)}


def norm_bwd_cluster(module, name, x, dy, w, stats, programs, stages, warps, ctas):
    """The library's backward kernel on its unsplit whole-row path, `programs` programs of `ctas` CTAs, then the
    library's partial-row sum."""
    rows, dim = x.shape
    block, _ = row_block(dim)
    rows_per_program = triton.cdiv(rows, programs)
    programs = triton.cdiv(rows, rows_per_program)
    dx = torch.empty_like(x)
    k = 2 if name == "layernorm" else 1
    partials = torch.empty(k, programs, dim, dtype=torch.float32, device=x.device)
    if name == "layernorm":
        mean, rstd = stats
        handle = module._layernorm_bwd_kernel.fn[(programs,)](
            x, w, dy, mean, rstd, dx, partials[0], partials[1], x.stride(0), dy.stride(0), dx.stride(0), rows, dim,
            rows_per_program, BLOCK=block, SINGLE=True, ROWS=1, STAGES=stages, SPLIT=False, num_warps=warps,
            num_ctas=ctas)
    else:
        (rstd,) = stats
        handle = module._rmsnorm_bwd_kernel.fn[(programs,)](
            x, w, dy, rstd, dx, partials, x.stride(0), dy.stride(0), dx.stride(0), rows, dim, rows_per_program,
            BLOCK=block, SINGLE=True, ROWS=1, STAGES=stages, num_warps=warps, num_ctas=ctas)
    return (dx, *sum_partials(partials, w.dtype)), handle


def rel_diff(got, want) -> float:
    return max(float((g.double() - r.double()).abs().max() / r.double().abs().max().clamp_min(1e-30))
               for g, r in zip(got, want))


def time_all(out, calls, shape, dev):
    for rnd in range(3):
        for name, fn in calls.items():
            t = time_call(fn, dev, TimingConfig())
            s = t.summary()
            emit(out, kind="time", round=rnd, shape=shape, call=name, median_us=round(s["median_ms"] * 1e3, 3),
                 n=s["n"], method=t.method)


def softmax_part(out, dev, smoke):
    cases = ({(4, 300): [(2, 4)], (2, 1000): [(4, 4)]} if smoke else
             {(1024, 16384): [(2, 16), (2, 8)], (256, 65536): [(4, 16), (2, 32), (8, 8)],
              (64, 262144): [(8, 32), (8, 16)]})
    for (rows, dim), variants in cases.items():
        g = torch.Generator(device=dev).manual_seed(0)
        x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        block = triton.next_power_of_2(dim)
        calls = {"softmax library": lambda: SM.softmax_fwd(x, out=y)}
        for ctas, warps in variants:
            calls[f"softmax row, {ctas} CTAs x {warps} warps"] = lambda ctas=ctas, warps=warps: _softmax_row[(rows,)](
                x, y, x.stride(0), y.stride(0), dim, BLOCK=block, num_warps=warps, num_ctas=ctas)
        good = {}
        for name, fn in calls.items():
            y.zero_()
            try:
                handle = fn()
            except Exception as e:  # a cluster the launch refuses: recorded, not timed
                emit(out, kind="check", shape=[rows, dim], call=name, error=f"{type(e).__name__}: {str(e)[:300]}")
                continue
            err = float((y.double() - ref).norm() / ref.norm())
            emit(out, kind="check", shape=[rows, dim], call=name, rel_err=err,
                 **(compiled(handle) if "row" in name and not smoke else {}))
            if err < 1e-2:
                good[name] = fn
        if not smoke:
            time_all(out, good, [rows, dim], dev)


def backward_part(out, dev, smoke):
    shapes = [(8, 64)] if smoke else [(1024, 16384), (4096, 16384)]
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        block, single = row_block(dim)
        sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev == "cuda" else 4
        split_programs, _ = reduction_programs(rows, block, x.device, split_columns(block, single))
        lib = {"rmsnorm": lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
               "layernorm": lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        calls = {}
        for name, module, stats in (("rmsnorm", RN, (rstd,)), ("layernorm", LN, (mean, lrstd))):
            want = lib[name]()
            calls[f"{name} library"] = lib[name]
            variants = [(2, 1, 16, 2)] if smoke else [(programs, stages, 16, 2) for programs in (split_programs, sms)
                                                      for stages in (1, 3)]
            for programs, stages, warps, ctas in variants:
                label = f"{name} whole rows, {programs} programs x {ctas} CTAs, {warps} warps, stages {stages}"
                fn = (lambda module=module, name=name, stats=stats, programs=programs, stages=stages, warps=warps,
                      ctas=ctas: norm_bwd_cluster(module, name, x, dy, w, stats, programs, stages, warps, ctas)[0])
                try:
                    got, handle = norm_bwd_cluster(module, name, x, dy, w, stats, programs, stages, warps, ctas)
                except Exception as e:
                    emit(out, kind="check", shape=[rows, dim], call=label, error=f"{type(e).__name__}: {str(e)[:300]}")
                    continue
                diff = rel_diff(got, want)
                emit(out, kind="check", shape=[rows, dim], call=label, rel_diff_from_library=diff,
                     **(compiled(handle) if not smoke else {}))
                if diff < 2e-2:
                    calls[label] = fn
        if not smoke:
            time_all(out, calls, [rows, dim], dev)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    if not smoke:
        set_benchmark(autotune_bench)  # as bench's worker does
        emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    softmax_part(out, dev, smoke)
    backward_part(out, dev, smoke)
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
