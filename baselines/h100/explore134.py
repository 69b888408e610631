"""Session 54, to run: the norm forwards' walk at one 16K-wide chunk a pass, on an H100. explore133 read Inductor's
pick for 16K-wide layernorm rows from its cache: three loops over the row, as in the library's walk, each one
16384-wide step at 32 warps (R0_BLOCK 16384). explore130 and explore132 timed the walk at chunks up to 8K only,
and the library's fp32 layernorm forward still trails compile by 1.3-1.9% from 4096 rows. Here the walk (copied
in explore130 and explore132) is timed at 8K and 16K chunks and 32 warps, layernorm in fp32 and bf16 and rmsnorm in
bf16, beside the library, torch.compile of the eager formula and a copy of the same bytes; all by bench.timing (the
suite's timer, L2 flushed), two rounds in alternation.

Run from the repository root: python3 baselines/h100/explore134.py OUT_DIR   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h100/explore134.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from explore130 import variant as ln_variant  # noqa: E402
from explore132 import norm_inputs, rms_variant, run_sets  # noqa: E402
from explore133 import SETS  # noqa: E402
from impls.layernorm import layernorm_eager  # noqa: E402
from impls.rmsnorm import rmsnorm_eager  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RMS  # noqa: E402

CHUNKS = (8192, 16384)


def cases_for(component, dtype, rows, dev, comp):
    """(reference, {impl: fn}) for one component, dtype and row count at 16K-wide rows."""
    x, w, b, y = norm_inputs(dtype, rows, dev)
    warps = 4 if dev == "cpu" else 32
    if component == "layernorm":
        ref = layernorm_eager(x.double(), w.double(), b.double())
        fns = {"library": lambda: LN.layernorm_fwd(x, w, b, out=y, stats=False)[0]}
        for c in CHUNKS:
            fns[f"w{warps}-c{c}"] = lambda c=c: ln_variant(x, w, b, y, warps, c, True)
        args = (x, w, b)
    else:
        ref = rmsnorm_eager(x.double(), w.double())
        fns = {"library": lambda: RMS.rmsnorm_fwd(x, w, out=y, stats=False)[0]}
        for c in CHUNKS:
            fns[f"w{warps}-c{c}"] = lambda c=c: rms_variant(x, w, y, warps, c)
        args = (x, w)
    if comp is not None:
        fns["compile"] = lambda: comp(*args)
    fns["copy"] = lambda: y.copy_(x)
    return ref, fns


def main(out_dir, smoke):
    run_sets("explore134", out_dir, smoke, cases_for, SETS)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args else None, smoke)
