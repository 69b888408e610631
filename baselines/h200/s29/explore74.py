"""Session 29: softmax over long rows written once unnormalized, then rescaled in place.

The library's long-row softmax reads x twice (statistics, then the output), the second read from L2 only while
x and the y being written both fit there (32 MB each at issue 8's 16.8M-element shapes, 50 MB of L2). Here the
first pass writes e = exp(x - m_chunk) into y with each chunk's own max (one read of x, evict_first), and the
second pass rescales y in place by exp(m_chunk - row max) / row sum: it reads the lines the first pass just
wrote (dirty in L2) and writes the same lines, so only y's 32 MB need to stay in L2. In bf16 y is rounded twice
(e, then e times the factor), so each variant's error against float64 is recorded beside its time.

- `chunk<C>-w<warps>`: two kernels, a program per (row, C-column chunk); the second a dependent launch (PDL),
  its programs in reverse order (the last chunks written first).
- `rows<C>-w<warps>`: one kernel, a program per row: chunk loop writing e and each chunk's max to a scratch row,
  a block barrier, then the rescale loop over the same row.
- `copy`, `copy+scale`: y.copy_(x), and the copy followed by y.mul_(1.0) in place (the scheme's bytes without
  its arithmetic), beside the library's `lib`.

Each variant is checked against float64 (relative L2 error, and max error over max |ref|), then timed by
bench.timing (L2 zeroed before each call), three rounds alternating.

Run from the repository root: python3 baselines/h200/s29/explore74.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s29/explore74.py --smoke   (CPU: checks)
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

from kernels import softmax as SM  # noqa: E402
from kernels._rows import dependent_kwargs, gdc_wait  # noqa: E402


@triton.jit
def _chunk_exp_kernel(X, Y, CM, CS, stride_x, stride_y, n_cols, n_chunks, C: tl.constexpr):
    """Program (row, chunk): y = exp(x - chunk max) in y's dtype; the chunk's max and the sum of what was
    stored to CM, CS [rows, chunks]."""
    row, ch = tl.program_id(0), tl.program_id(1)
    cols = ch * C + tl.arange(0, C)
    mask = cols < n_cols
    x = tl.load(X + row.to(tl.int64) * stride_x + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first")
    x = x.to(tl.float32)
    m = tl.maximum(tl.max(x, axis=0), -3.0e38)  # a chunk of only -inf: zeros, not NaN
    e = tl.exp(x - m).to(Y.dtype.element_ty)
    tl.store(Y + row.to(tl.int64) * stride_y + cols, e, mask=mask)
    tl.store(CM + row * n_chunks + ch, m)
    tl.store(CS + row * n_chunks + ch, tl.sum(e.to(tl.float32), axis=0))


@triton.jit
def _chunk_scale_kernel(Y, CM, CS, stride_y, n_cols, n_chunks, C: tl.constexpr, SEGS: tl.constexpr,
                        WAIT: tl.constexpr):
    """Program (row, chunk), in the reverse of the first kernel's order: the row's max and sum from its chunks',
    then y *= exp(chunk max - row max) / row sum in place."""
    if WAIT:
        gdc_wait()
    row, ch = tl.num_programs(0) - 1 - tl.program_id(0), tl.num_programs(1) - 1 - tl.program_id(1)
    k = tl.arange(0, SEGS)
    ms = tl.load(CM + row * n_chunks + k, mask=k < n_chunks, other=-float("inf"))
    ss = tl.load(CS + row * n_chunks + k, mask=k < n_chunks, other=0.0)
    row_max = tl.max(ms, axis=0)
    total = tl.sum(ss * tl.exp(ms - row_max), axis=0)
    f = tl.exp(tl.load(CM + row * n_chunks + ch) - row_max) / total
    cols = ch * C + tl.arange(0, C)
    mask = cols < n_cols
    ptr = Y + row.to(tl.int64) * stride_y + cols
    y = tl.load(ptr, mask=mask, other=0.0).to(tl.float32)
    tl.store(ptr, (y * f).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _rows_kernel(X, Y, CM, stride_x, stride_y, n_cols, n_chunks, C: tl.constexpr):
    """Program per row: chunks of e = exp(x - chunk max) into y, each max to CM[row, chunk], a running
    (max, sum); a block barrier; then y *= exp(chunk max - max) / sum, chunk by chunk."""
    row = tl.program_id(0).to(tl.int64)
    x_ptr, y_ptr = X + row * stride_x, Y + row * stride_y
    row_max = tl.full([], -3.0e38, dtype=tl.float32)
    total = tl.zeros([], dtype=tl.float32)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        mask = cols < n_cols
        x = tl.load(x_ptr + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        m = tl.maximum(tl.max(x, axis=0), -3.0e38)
        e = tl.exp(x - m).to(Y.dtype.element_ty)
        tl.store(y_ptr + cols, e, mask=mask)
        tl.store(CM + row * n_chunks + start // C, m)
        m_new = tl.maximum(row_max, m)
        total = total * tl.exp(row_max - m_new) + tl.sum(e.to(tl.float32), axis=0) * tl.exp(m - m_new)
        row_max = m_new
    tl.debug_barrier()  # the chunk maxes and e, stored by other threads, visible to the whole block
    inv = 1.0 / total
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        mask = cols < n_cols
        f = tl.exp(tl.load(CM + row * n_chunks + start // C) - row_max) * inv
        y = tl.load(y_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + cols, (y * f).to(Y.dtype.element_ty), mask=mask)


def chunk_softmax(x, y, C, warps):
    rows, cols = x.shape
    n = triton.cdiv(cols, C)
    cm = torch.empty(rows, n, dtype=torch.float32, device=x.device)
    cs = torch.empty_like(cm)
    _chunk_exp_kernel[(rows, n)](x, y, cm, cs, x.stride(0), y.stride(0), cols, n, C=C, num_warps=warps)
    _chunk_scale_kernel[(rows, n)](y, cm, cs, y.stride(0), cols, n, C=C, SEGS=triton.next_power_of_2(n),
                                   num_warps=warps, **dependent_kwargs(x.device))
    return y


def rows_softmax(x, y, C, warps):
    rows, cols = x.shape
    n = triton.cdiv(cols, C)
    cm = torch.empty(rows, n, dtype=torch.float32, device=x.device)
    _rows_kernel[(rows,)](x, y, cm, x.stride(0), y.stride(0), cols, n, C=C, num_warps=warps)
    return y


def errors(y, ref):
    d = (y.double() - ref)
    return {"rel_l2": float(d.norm() / ref.norm()), "max_over_max": float(d.abs().max() / ref.abs().max())}


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def variants(rows, dim, smoke):
    v = {}
    chunks = [(64, 2)] if smoke else [(2048, 4), (4096, 8), (8192, 16)]
    for c, w in chunks:
        v[f"chunk{c}-w{w}"] = lambda x, y, c=c, w=w: chunk_softmax(x, y, c, w)
    row_cfgs = [(64, 2)] if smoke else [(4096, 16), (8192, 16), (8192, 32)]
    if smoke or rows >= 256:  # one program a row only where the rows fill the GPU
        for c, w in row_cfgs:
            v[f"rows{c}-w{w}"] = lambda x, y, c=c, w=w: rows_softmax(x, y, c, w)
    return v


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())
    shapes = [(3, 300), (2, 1000), (5, 130)] if smoke else [(64, 262144), (256, 65536), (1024, 16384)]
    dtypes = [torch.bfloat16, torch.float32] if smoke else [torch.bfloat16]
    for rows, dim in shapes:
        for dtype in dtypes:
            g = torch.Generator(device=dev).manual_seed(0)
            x = (3 * torch.randn(rows, dim, device=dev, generator=g)).to(dtype)
            ref = torch.softmax(x.double(), dim=-1)
            y = torch.empty_like(x)
            calls = {"lib": lambda: SM.softmax_fwd(x, out=y)}
            calls.update({name: (lambda f=f: f(x, y)) for name, f in variants(rows, dim, smoke).items()})
            for name, fn in calls.items():
                y.fill_(float("nan"))
                fn()
                err = errors(y, ref)
                ok = err["max_over_max"] < 2e-2 and err["rel_l2"] < 1e-2
                emit(out, kind="check", shape=[rows, dim], dtype=str(dtype), call=name, ok=ok, **err)
                if not ok:
                    calls[name] = None
            if smoke:
                continue
            calls["copy"] = lambda: y.copy_(x)
            calls["copy+scale"] = lambda: y.copy_(x).mul_(1.0)
            for rnd in range(3):
                for name, fn in calls.items():
                    if fn is not None:
                        emit(out, kind="time", shape=[rows, dim], call=name, round=rnd,
                             us=round(timer(fn) * 1e3, 2))
    if smoke:
        print("smoke: every variant checked")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
