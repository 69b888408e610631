"""Session 52: where the H100's layernorm rule (`kernels/layernorm.py: _passes_chunk`: 8K chunks at 32 warps for
16K-wide rows from 4096 rows, else 4K chunks at 16 warps) was not measured: bf16 between 1024 and 4096 rows, and
fp32 (session 51 measured bf16 at 1024, 4096, 16384 and 65536 rows only). The library's forward is timed with each
chunk forced (its autotuner's cache kept per chunk, so neither reuses the other's launch), beside torch.compile of
the eager formula and a copy of the same bytes; all by bench.timing (the suite's timer, L2 flushed), two rounds in
alternation, one dtype at a time (one compiled function per dtype, recompiled per shape).

Run from the repository root: python3 baselines/h100/explore131.py OUT_DIR   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h100/explore131.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from impls.layernorm import compiled, layernorm_eager  # noqa: E402
from kernels import layernorm as LN  # noqa: E402

T0 = time.time()
CHUNKS = (4096, 8192)
ROWS = {"bf16": (1024, 1536, 2048, 3072, 4096), "fp32": (1024, 2048, 4096, 16384, 65536)}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
_caches = {c: {} for c in CHUNKS}  # the autotuner's cache per forced chunk


def library(x, w, b, y, chunk):
    LN._passes_chunk = lambda device, n_rows: chunk
    LN._layernorm_fwd_kernel.cache = _caches[chunk]
    return LN.layernorm_fwd(x, w, b, out=y, stats=False)[0]


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(out_dir, smoke):
    dev = "cpu" if smoke else "cuda"
    out = None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        out = open(os.path.join(out_dir, "explore131.jsonl"), "w")
    if smoke:
        def timer(fn):
            fn()
            return 0.0
    else:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        emit(out, kind="env", torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name())

        def timer(fn):
            return round(BT.time_call(fn, "cuda", cfg).summary()["median_ms"] * 1e3, 2)
    for dname, dtype in DTYPES.items():
        cases = []
        comp = None if smoke else compiled({}, dname, dev)  # dynamic=False: specialized per shape
        for rows in ((3,) if smoke else ROWS[dname]):
            dim = 16384
            g = torch.Generator(device=dev).manual_seed(0)
            x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).to(dtype)
            w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).to(dtype)
            b = (0.1 * torch.randn(dim, device=dev, generator=g)).to(dtype)
            y = torch.empty_like(x)
            ref = layernorm_eager(x.double(), w.double(), b.double())
            shape = f"{rows}x{dim}"
            fns = {f"c{c}": (lambda x=x, w=w, b=b, y=y, c=c: library(x, w, b, y, c)) for c in CHUNKS}
            fns["copy"] = lambda x=x, y=y: y.copy_(x)
            if comp is not None:
                fns["compile"] = lambda x=x, w=w, b=b: comp(x, w, b)
            for name, fn in fns.items():
                if name == "copy":
                    continue
                got = fn().double()
                err = float((got - ref).abs().max() / ref.abs().max())
                emit(out, kind="check", dtype=dname, shape=shape, impl=name, rel_err=err)
                assert err < 2e-2, (dname, shape, name, err)
            cases.append((shape, fns))
        for rnd in range(1 if smoke else 2):
            for shape, fns in cases:
                for name, fn in fns.items():
                    emit(out, kind="time", dtype=dname, shape=shape, impl=name, round=rnd, us=timer(fn))


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else None, smoke)
