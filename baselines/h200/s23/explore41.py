"""Session 23: the split softmax (few long rows, two kernels) with its second kernel launched as a programmatic
dependent launch, and the split tried again at 256 x 65536 now that the second launch costs less.

Run from the repository root: python3 baselines/h200/s23/explore41.py OUT.jsonl

Each variant's forward and backward is compared bit for bit with the plain launch's (20 calls after an L2 flush),
then timed by bench.timing, two rounds alternating. `split<N>` forces the split at 256 x 65536 (rows fewer than
4 an SM split) with N programs an SM wanted (kernels.softmax.SPLIT_PROGRAMS_PER_SM; the library's 8).
"""
from __future__ import annotations

import json
import sys
import time

import torch

from bench.timing import TimingConfig, l2_flusher, time_cuda
from kernels import _rows
from kernels import softmax as SM

COPY_GBPS = 4279.0
T0 = time.time()
DEFAULTS = (SM.SPLIT_PROGRAMS_PER_SM, SM.SPLIT_BELOW_ROWS_PER_SM)


def use(variant: str):
    """off / pdl: the library's split choice; split<N>[-off]: split forced, N programs an SM."""
    _rows.DEPENDENT_LAUNCH = not variant.endswith("off")
    SM.SPLIT_PROGRAMS_PER_SM, SM.SPLIT_BELOW_ROWS_PER_SM = DEFAULTS
    if variant.startswith("split"):
        SM.SPLIT_PROGRAMS_PER_SM, SM.SPLIT_BELOW_ROWS_PER_SM = int(variant[5:].split("-")[0]), 4


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def main(path: str):
    cfg = TimingConfig()
    flush = l2_flusher(torch.cuda.current_device())
    cases = {(64, 262144): ["off", "pdl"], (256, 65536): ["off", "split4", "split8", "split8-off", "split16"]}
    with open(path, "w") as out:
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
             triton=__import__("triton").__version__)
        for (rows, dim), variants in cases.items():
            g = torch.Generator(device="cuda").manual_seed(0)
            x = (4 * torch.randn(rows, dim, device="cuda", generator=g)).bfloat16()
            dy = torch.randn(rows, dim, device="cuda", generator=g).bfloat16()
            use("off")
            y_ref = SM.softmax_fwd(x)
            dx_ref = SM.softmax_bwd(dy, y_ref)
            ref64 = torch.softmax(x.double(), -1)
            emit(out, kind="ref", shape=[rows, dim], segments=SM.row_segments(rows, dim, x.device),
                 fwd_err=float((y_ref.double() - ref64).abs().max() / ref64.abs().max()))
            nbytes = 2 * rows * dim * 2
            for variant in variants:
                use(variant)
                bad = 0
                for _ in range(20):
                    flush()
                    y = SM.softmax_fwd(x)
                    dx = SM.softmax_bwd(dy, y_ref)
                    torch.cuda.synchronize()
                    if variant.endswith("off") or variant == "pdl":  # same segments: bit for bit
                        bad += not (torch.equal(y, y_ref) and torch.equal(dx, dx_ref))
                    else:  # other segments: within rounding of float64
                        bad += float((y.double() - ref64).abs().max() / ref64.abs().max()) > 1e-2
                emit(out, kind="check", shape=[rows, dim], variant=variant, bad_calls=bad,
                     segments=SM.row_segments(rows, dim, x.device))
            for rnd in range(2):
                for variant in variants:
                    use(variant)
                    for mode, fn, nb in (("fwd", lambda: SM.softmax_fwd(x), nbytes),
                                         ("bwd", lambda: SM.softmax_bwd(dy, y_ref), nbytes * 3 // 2)):
                        us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                        emit(out, kind="time", shape=[rows, dim], variant=variant, mode=mode, round=rnd,
                             us=round(us, 2), pct=round(100 * nb / (us * 1e-6) / 1e9 / COPY_GBPS, 1))
            use("off")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "explore41.jsonl")
