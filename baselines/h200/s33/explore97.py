"""Session 33: the norm backwards at 16K-wide rows, each row split between two programs that swap their partial
sums through global memory.

The library's layernorm backward at 16K-wide rows gives each row range two programs, each owning half the columns
but reading the whole row for the row's sums (_layernorm_bwd_half): every SM reads 64 KB a row to write 16 KB.
rmsnorm's walks whole rows, one program an SM, with 132 fp32 partial rows of dw to sum at 1024 x 16384. Here the
two programs of a pair each read only their half and publish their half's sums (layernorm: sum g and sum
g * xhat; rmsnorm: sum g * xhat), each as one relaxed 64-bit word with the call's epoch in its upper half (no fence:
explore97a's release store of a flag waited for the program's earlier stores of dx and was slower still), and poll
the partner's words before writing dx. Three rows are in flight a step: row r + 2's loads issued, row r + 1's
sums published, row r's partner sums awaited and its dx written. The grid is two programs a row range, at most
one program an SM (all resident, so a wait always ends); dw (and db) are summed from one partial row a pair by
the library's sum_partials. Checked against the library's dx, dw, db, then timed by bench.timing beside it, three
rounds in alternation. GPU only: under the CPU
interpreter the programs run one after another and the first wait would never end; `--offline` compiles the
kernels for sm_90a instead and prints registers and spills.

Run from the repository root: python3 baselines/h200/s33/explore97.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s33/explore97.py --offline   (no GPU)
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
def _publish(XCHG, row, half, s1, s2, epoch, ok_row, LAYER: tl.constexpr):
    """The half's sums, each with the call's epoch in its upper 32 bits: one relaxed 64-bit write a sum, no
    fence (a release would wait for this program's earlier stores of dx)."""
    slot = (row * 2 + half).to(tl.int64) * 2
    tag = epoch.to(tl.int64) << 32
    tl.atomic_xchg(XCHG + slot + 1, tag | (s2.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF),
                   sem="relaxed", mask=ok_row)
    if LAYER:
        tl.atomic_xchg(XCHG + slot, tag | (s1.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF),
                       sem="relaxed", mask=ok_row)


@triton.jit
def _take(ptr, epoch):
    v = tl.atomic_add(ptr, 0, sem="relaxed")
    while (v >> 32) != epoch:
        v = tl.atomic_add(ptr, 0, sem="relaxed")
    return (v & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _partner(XCHG, row, half, epoch, LAYER: tl.constexpr):
    slot = (row * 2 + 1 - half).to(tl.int64) * 2
    p2 = _take(XCHG + slot + 1, epoch)
    p1 = _take(XCHG + slot, epoch) if LAYER else 0.0
    return p1, p2


@triton.jit
def _load_half(X, DY, MEAN, RSTD, row, ok_row, own, own_ok, stride_x, stride_dy, LAYER: tl.constexpr):
    mask = own_ok & ok_row
    row64 = row.to(tl.int64)
    x = tl.load(X + row64 * stride_x + own, mask=mask, other=0.0)
    dy = tl.load(DY + row64 * stride_dy + own, mask=mask, other=0.0)
    rstd = tl.load(RSTD + row, mask=ok_row, other=0.0)
    mean = tl.load(MEAN + row, mask=ok_row, other=0.0) if LAYER else 0.0
    return x, dy, mean, rstd


@triton.jit
def _sums(x, dy, w, mean, rstd, LAYER: tl.constexpr):
    xhat, g = _half_terms(x, dy, w, mean, rstd, LAYER)
    return (tl.sum(g, axis=0) if LAYER else 0.0), tl.sum(g * xhat, axis=0)


@triton.jit(do_not_specialize=["epoch"])  # the first call's epoch, 1, would otherwise be compiled in
def _norm_bwd_pair(X, W, DY, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, XCHG, epoch, stride_x, stride_dy,
                   stride_dx, n_rows, n_cols, rows_per_range, HALF: tl.constexpr, LAYER: tl.constexpr):
    """Rows r, r + 1 and r + 2 in flight at step r: r + 2's loads issued, r + 1's sums (loaded a step ago)
    published, r's partner sums awaited and its dx written."""
    pid = tl.program_id(0)
    pair = pid // 2
    half = pid % 2
    first = pair * rows_per_range
    last = tl.minimum(first + rows_per_range, n_rows)
    own = half * HALF + tl.arange(0, HALF)
    own_ok = own < n_cols
    dw = tl.zeros([HALF], dtype=tl.float32)
    db = tl.zeros([HALF], dtype=tl.float32)
    xa, dya, ma, ra = _load_half(X, DY, MEAN, RSTD, first, first < last, own, own_ok, stride_x, stride_dy, LAYER)
    s1a, s2a = _sums(xa, dya, tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32), ma, ra, LAYER)
    _publish(XCHG, first, half, s1a, s2a, epoch, first < last, LAYER)
    xb, dyb, mb, rb = _load_half(X, DY, MEAN, RSTD, first + 1, first + 1 < last, own, own_ok, stride_x, stride_dy,
                                 LAYER)
    for row in range(first, last):
        xc, dyc, mc, rc = _load_half(X, DY, MEAN, RSTD, row + 2, row + 2 < last, own, own_ok, stride_x,
                                     stride_dy, LAYER)
        s1b, s2b = _sums(xb, dyb, tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32), mb, rb, LAYER)
        _publish(XCHG, row + 1, half, s1b, s2b, epoch, row + 1 < last, LAYER)
        p1, p2 = _partner(XCHG, row, half, epoch, LAYER)
        xhat, g = _half_terms(xa, dya, tl.load(W + own, mask=own_ok, other=0.0).to(tl.float32), ma, ra, LAYER)
        dyf = dya.to(tl.float32)
        dw += dyf * xhat
        db += dyf
        c1 = (s1a + p1) / n_cols
        c2 = (s2a + p2) / n_cols
        if LAYER:
            dx = ra * (g - c1 - xhat * c2)
        else:
            dx = ra * (g - xhat * c2)
        tl.store(DX + row.to(tl.int64) * stride_dx + own, dx.to(DX.dtype.element_ty), mask=own_ok)
        xa, dya, ma, ra, s1a, s2a = xb, dyb, mb, rb, s1b, s2b
        xb, dyb, mb, rb = xc, dyc, mc, rc
    tl.store(DW_PARTIAL + pair.to(tl.int64) * n_cols + own, dw, mask=own_ok)
    if LAYER:
        tl.store(DB_PARTIAL + pair.to(tl.int64) * n_cols + own, db, mask=own_ok)


class Pair:
    """The paired backward for one shape: the flags persist, and each call gets the next epoch."""

    def __init__(self, n_rows, device, ranges, warps):
        self.xchg = torch.zeros(4 * n_rows, dtype=torch.int64, device=device)  # [rows, 2 halves, 2 sums]
        self.epoch, self.ranges, self.warps = 0, ranges, warps

    def __call__(self, dy, x, w, stats, layer):
        n_rows, n_cols = x.shape
        per = triton.cdiv(n_rows, self.ranges)
        ranges = triton.cdiv(n_rows, per)
        dx = torch.empty_like(x)
        partials = torch.empty(2 if layer else 1, ranges, n_cols, dtype=torch.float32, device=x.device)
        mean, rstd = stats if layer else (stats[0], stats[0])
        self.epoch += 1
        _norm_bwd_pair[(2 * ranges,)](x, w, dy, mean, rstd, dx, partials[0], partials[-1], self.xchg,
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
           "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32", "XCHG": "*i64", "epoch": "i32",
           "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "n_rows": "i32", "n_cols": "i32",
           "rows_per_range": "i32", "HALF": "constexpr", "LAYER": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i, (n, k) in enumerate(sig.items()) if k.startswith("*")}
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    print(f"triton {triton.__version__}, sm_90a")
    for layer in (True, False):
        for warps in (16, 32):
            src = ASTSource(fn=_norm_bwd_pair, signature=sig, constexprs={"HALF": 8192, "LAYER": layer}, attrs=attrs)
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
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
                    emit(out, kind="check", shape=[rows, dim], call=label,
                         error=f"{type(e).__name__}: {str(e)[:300]}")
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
