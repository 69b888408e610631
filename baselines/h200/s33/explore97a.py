"""Session 33, the first version of explore97 (its results: explore97a.jsonl): the norm backwards at 16K-wide
rows, each row split between two programs that swap their partial sums through global memory.

The library's layernorm backward at 16K-wide rows gives each row range two programs, each owning half the columns
but reading the whole row for the row's sums (_layernorm_bwd_half): every SM reads 64 KB a row to write 16 KB.
rmsnorm's walks whole rows, one program an SM, with 132 fp32 partial rows of dw to sum at 1024 x 16384. Here the
two programs of a pair each read only their half, publish their half's sums (layernorm: sum g and sum g * xhat;
rmsnorm: sum g * xhat) with a release store of the call's epoch to a flag, and wait (acquire) for the partner's
before writing dx. The next row is loaded and published before waiting on this one, so the swap's latency overlaps
a row's loads. The grid is two programs a row range, at most one program an SM (all resident, so a wait always
ends); dw (and db) are summed from one partial row a pair by the library's sum_partials. Checked against the
library's dx, dw, db, then timed by bench.timing beside it, three rounds in alternation. GPU only: under the CPU
interpreter the programs run one after another and the first wait would never end; `--offline` compiles the
kernels for sm_90a instead and prints registers and spills.

Run from the repository root: python3 baselines/h200/s33/explore97a.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s33/explore97a.py --offline   (no GPU)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402
from kernels._rows import sum_partials  # noqa: E402


@triton.jit
def _half_terms(x, dy, w, mean, rstd, LAYER: tl.constexpr):
    """xhat and g = dy * w of a half row, from its x and dy as loaded."""
    if LAYER:
        xhat = x.to(tl.float32) * rstd - mean * rstd
    else:
        xhat = x.to(tl.float32) * rstd
    return xhat, dy.to(tl.float32) * w


@triton.jit
def _half_row(X, W, DY, MEAN, RSTD, row, ok_row, own, own_ok, stride_x, stride_dy, LAYER: tl.constexpr):
    """This program's half of row `row` as loaded (nothing loaded when not ok_row), its mean and rstd, and the
    half's sums (layernorm: sum g, sum g * xhat; rmsnorm: 0, sum g * xhat). x and dy stay in their dtype until
    used again, so that the row carried to the next step holds half the registers."""
    mask = own_ok & ok_row
    row64 = row.to(tl.int64)
    rstd = tl.load(RSTD + row, mask=ok_row, other=0.0)
    mean = tl.load(MEAN + row, mask=ok_row, other=0.0) if LAYER else 0.0
    x = tl.load(X + row64 * stride_x + own, mask=mask, other=0.0)
    dy = tl.load(DY + row64 * stride_dy + own, mask=mask, other=0.0)
    xhat, g = _half_terms(x, dy, tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32), mean, rstd, LAYER)
    s1 = tl.sum(g, axis=0) if LAYER else 0.0
    return x, dy, mean, rstd, s1, tl.sum(g * xhat, axis=0)


@triton.jit
def _publish(XCHG, FLAGS, row, half, s1, s2, epoch, ok_row):
    slot = (row * 2 + half).to(tl.int64)
    tl.store(XCHG + slot * 2, s1, mask=ok_row)
    tl.store(XCHG + slot * 2 + 1, s2, mask=ok_row)
    tl.atomic_xchg(FLAGS + slot, epoch, sem="release", scope="gpu", mask=ok_row)


@triton.jit
def _partner(XCHG, FLAGS, row, half, epoch):
    slot = (row * 2 + 1 - half).to(tl.int64)
    flag = tl.atomic_add(FLAGS + slot, 0, sem="acquire", scope="gpu")
    while flag != epoch:
        flag = tl.atomic_add(FLAGS + slot, 0, sem="acquire", scope="gpu")
    return (tl.load(XCHG + slot * 2, volatile=True), tl.load(XCHG + slot * 2 + 1, volatile=True))


@triton.jit
def _norm_bwd_pair(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, XCHG, FLAGS, epoch, stride_x, stride_dy,
                   stride_dx, n_rows, n_cols, rows_per_range, HALF: tl.constexpr, LAYER: tl.constexpr):
    pid = tl.program_id(0)
    pair = pid // 2
    half = pid % 2
    first = pair * rows_per_range
    last = tl.minimum(first + rows_per_range, n_rows)
    own = half * HALF + tl.arange(0, HALF)
    own_ok = own < n_cols
    dw = tl.zeros([HALF], dtype=tl.float32)
    db = tl.zeros([HALF], dtype=tl.float32)
    x, dy, mean, rstd, s1, s2 = _half_row(X, W, DY, MEAN, RSTD, first, first < last, own, own_ok, stride_x,
                                          stride_dy, LAYER)
    _publish(XCHG, FLAGS, first, half, s1, s2, epoch, first < last)
    for row in range(first, last):
        nxt = row + 1  # loaded and published before this row's wait
        x_n, dy_n, mean_n, rstd_n, s1_n, s2_n = _half_row(X, W, DY, MEAN, RSTD, nxt, nxt < last, own, own_ok,
                                                          stride_x, stride_dy, LAYER)
        _publish(XCHG, FLAGS, nxt, half, s1_n, s2_n, epoch, nxt < last)
        p1, p2 = _partner(XCHG, FLAGS, row, half, epoch)
        xhat, g = _half_terms(x, dy, tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32), mean, rstd, LAYER)
        dyf = dy.to(tl.float32)
        dw += dyf * xhat
        db += dyf
        c1 = (s1 + p1) / n_cols
        c2 = (s2 + p2) / n_cols
        if LAYER:
            dx = rstd * (g - c1 - xhat * c2)
        else:
            dx = rstd * (g - xhat * c2)
        tl.store(DX + row.to(tl.int64) * stride_dx + own, dx.to(DX.dtype.element_ty), mask=own_ok)
        x, dy, mean, rstd, s1, s2 = x_n, dy_n, mean_n, rstd_n, s1_n, s2_n
    tl.store(DW_PARTIAL + pair.to(tl.int64) * n_cols + own, dw, mask=own_ok)
    if LAYER:
        tl.store(DB_PARTIAL + pair.to(tl.int64) * n_cols + own, db, mask=own_ok)


class Pair:
    """The paired backward for one shape: the flags persist, and each call gets the next epoch."""

    def __init__(self, n_rows, device, ranges, warps):
        self.flags = torch.zeros(2 * n_rows, dtype=torch.int32, device=device)
        self.xchg = torch.empty(4 * n_rows, dtype=torch.float32, device=device)
        self.epoch, self.ranges, self.warps = 0, ranges, warps

    def __call__(self, dy, x, w, stats, layer):
        n_rows, n_cols = x.shape
        per = triton.cdiv(n_rows, self.ranges)
        ranges = triton.cdiv(n_rows, per)
        dx = torch.empty_like(x)
        partials = torch.empty(2 if layer else 1, ranges, n_cols, dtype=torch.float32, device=x.device)
        mean, rstd = stats if layer else (stats[0], stats[0])
        self.epoch += 1
        _norm_bwd_pair[(2 * ranges,)](x, w, dy, mean, rstd, dx, partials[0], partials[-1], self.xchg, self.flags,
                                      self.epoch, x.stride(0), dy.stride(0), dx.stride(0), n_rows, n_cols, per,
                                      HALF=triton.next_power_of_2(n_cols) // 2, LAYER=layer, num_warps=self.warps)
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

    sig = {"X": "*bf16", "W": "*bf16", "DY": "*bf16", "MEAN": "*fp32", "RSTD": "*fp32", "DX": "*bf16",
           "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32", "XCHG": "*fp32", "FLAGS": "*i32", "epoch": "i32",
           "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "n_rows": "i32", "n_cols": "i32",
           "rows_per_range": "i32", "HALF": "constexpr", "LAYER": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i, (n, k) in enumerate(sig.items()) if k.startswith("*")}
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    print(f"triton {triton.__version__}, sm_90a")
    for layer in (True, False):
        for warps in (16, 32):
            k = triton.compile(ASTSource(fn=_norm_bwd_pair, signature=sig, constexprs={"HALF": 8192, "LAYER": layer},
                                         attrs=attrs), target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "k.ptx"), "w") as f:
                    f.write(k.asm["ptx"])
                log = subprocess.run([ptxas, "-arch=sm_90a", "-v", os.path.join(tmp, "k.ptx"), "-o",
                                      os.path.join(tmp, "k.o")], capture_output=True, text=True).stderr
            info = [ln.split(":", 1)[-1].strip() for ln in log.splitlines() if "registers" in ln or "spill" in ln]
            print(f"{'layernorm' if layer else 'rmsnorm'} pair, 16K-wide rows, {warps} warps:", "; ".join(info))


def main(path):
    out = open(path, "w")
    dev = "cuda"
    set_benchmark(autotune_bench)  # as bench's worker does
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for rows, dim in [(1024, 16384), (4096, 16384)]:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
        dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
        w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        calls = {}
        for name, layer, stats, lib in (("rmsnorm", False, (rstd,), lambda: RN.rmsnorm_bwd(dy, x, w, rstd)),
                                        ("layernorm", True, (mean, lrstd),
                                         lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd))):
            want = [t.double() for t in lib()]
            calls[f"{name} library"] = lib
            for ranges, warps in ((sms // 2, 16), (sms // 2, 32)):
                pair = Pair(rows, dev, ranges, warps)
                label = f"{name} pairs, {ranges} ranges, {warps} warps"
                fn = (lambda pair=pair, layer=layer, stats=stats: pair(dy, x, w, stats, layer))
                try:
                    got = fn()
                    torch.cuda.synchronize()
                except Exception as e:
                    emit(out, kind="check", shape=[rows, dim], call=label, error=f"{type(e).__name__}: {str(e)[:300]}")
                    continue
                diff = max(float((a.double() - r).abs().max() / r.abs().max().clamp_min(1e-30))
                           for a, r in zip(got, want))
                emit(out, kind="check", shape=[rows, dim], call=label, rel_diff_from_library=diff)
                if diff < 2e-2:
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
