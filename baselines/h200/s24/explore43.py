"""Session 24: the forward misses that sit below a copy of the same bytes, tried other ways.

Run from the repository root: python3 baselines/h200/s24/explore43.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s24/explore43.py --smoke   (CPU: checks only)

- softmax, few long rows (64 x 262144 split in two kernels, 256 x 65536 one program a row): the rows in G groups,
  each group its own split launch pair (`g<G>`), so the second kernel re-reads x from L2 while the group fits.
- softmax 1024 x 16384 (a whole 16K row in registers, one a program): two passes over 4K or 2K chunks
  (`passes<C>-w<warps>`, running max and sum a lane, then the output, the row length compiled in), as the norm
  forwards' row_passes do.
- layernorm 1024 x 16384 (three passes over 4K chunks): two passes, the chunks' mean and squared deviations
  merged as they come (Chan et al.), then the output (`chan<C>-w<warps>`), the row length compiled in.
Each variant is checked against float64 (max error over max |ref| under 2e-2), then timed by bench.timing
(L2 zeroed before each call), two rounds alternating, beside a copy of the same bytes (`copy`).
"""
from __future__ import annotations

import json
import sys
import time

import torch
import triton
import triton.language as tl

from kernels import layernorm as LN
from kernels import softmax as SM

COPY_GBPS = 4279.0
T0 = time.time()


@triton.jit
def _softmax_passes_kernel(X, Y, stride_x, stride_y, n_cols: tl.constexpr, C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_ptr = X + row * stride_x
    m = tl.full([C], -float("inf"), dtype=tl.float32)
    s = tl.zeros([C], dtype=tl.float32)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        x = tl.load(x_ptr + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        scale = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max, total = SM._merge_max_sum(m, s)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        ok = cols < n_cols
        x = tl.load(x_ptr + cols, mask=ok, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        tl.store(Y + row * stride_y + cols, (tl.exp(x - row_max) / total).to(Y.dtype.element_ty), mask=ok)


@triton.jit
def _layernorm_chan_kernel(X, W, B, Y, stride_x, stride_y, n_rows, n_cols: tl.constexpr, eps, C: tl.constexpr):
    LN._layernorm_fwd_chunked(X, W, B, Y, None, None, tl.program_id(0), stride_x, stride_y, n_rows, n_cols, eps, C,
                              1)


def softmax_passes(x, c, warps):
    y = torch.empty_like(x)
    _softmax_passes_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], C=c, num_warps=warps)
    return y


def softmax_grouped(x, groups):
    y = torch.empty_like(x)
    step = triton.cdiv(x.shape[0], groups)
    for r0 in range(0, x.shape[0], step):
        SM.softmax_fwd(x[r0:r0 + step], out=y[r0:r0 + step])
    return y


def layernorm_chan(x, w, b, c, warps):
    y = torch.empty_like(x)
    _layernorm_chan_kernel[(x.shape[0],)](x, w, b, y, x.stride(0), y.stride(0), x.shape[0], x.shape[1], 1e-5, C=c,
                                          num_warps=warps)
    return y


def cases(smoke: bool):
    """(component, rows, dim, {variant: call}, float64 reference, bytes moved) for each shape."""
    dev = "cpu" if smoke else "cuda"
    shapes = ({"softmax": [(4, 3000), (3, 5000)], "layernorm": [(3, 5000)]} if smoke else
              {"softmax": [(64, 262144), (256, 65536), (1024, 16384)], "layernorm": [(1024, 16384)]})
    for comp, pairs in shapes.items():
        for rows, dim in pairs:
            g = torch.Generator(device=dev).manual_seed(0)
            x = (4 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
            y = torch.empty_like(x)
            calls = {"copy": lambda x=x, y=y: y.copy_(x)} if not smoke else {}
            if comp == "softmax":
                ref = torch.softmax(x.double(), -1)
                calls["base"] = lambda x=x: SM.softmax_fwd(x)
                if dim > 16384 or smoke:
                    for groups in (2, 4, 8):
                        calls[f"g{groups}"] = lambda x=x, n=groups: softmax_grouped(x, n)
                if dim == 16384 or smoke:
                    for c, warps in ((4096, 8), (4096, 16), (2048, 4), (2048, 8)):
                        calls[f"passes{c}-w{warps}"] = lambda x=x, c=c, w=warps: softmax_passes(x, c, w)
            else:
                w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
                b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
                ref = torch.nn.functional.layer_norm(x.double(), (dim,), w.double(), b.double(), 1e-5)
                calls["base"] = lambda x=x, w=w, b=b: LN.layernorm_fwd(x, w, b)[0]
                for c, warps in ((4096, 8), (4096, 16), (2048, 4), (2048, 8)):
                    calls[f"chan{c}-w{warps}"] = lambda x=x, w=w, b=b, c=c, wp=warps: layernorm_chan(x, w, b, c, wp)
            yield comp, rows, dim, calls, ref, 2 * rows * dim * 2


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path: str | None, smoke: bool):
    out = open(path, "w") if path else None
    if not smoke:
        from bench.timing import TimingConfig, time_cuda
        cfg = TimingConfig()
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(), triton=triton.__version__)
    bad = 0
    for comp, rows, dim, calls, ref, nbytes in cases(smoke):
        for name, fn in calls.items():
            if name == "copy":
                continue
            err = float((fn().double() - ref).abs().max() / ref.abs().max())
            bad += err > 2e-2
            emit(out, kind="check", component=comp, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
        if smoke:
            continue
        for rnd in range(2):
            for name, fn in calls.items():
                us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", component=comp, shape=[rows, dim], variant=name, round=rnd, us=round(us, 2),
                     pct=round(100 * nbytes / (us * 1e-6) / 1e9 / COPY_GBPS, 1))
    if smoke and bad:
        raise SystemExit(f"{bad} variants off float64")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else (None if smoke else "explore43.jsonl"), smoke)
