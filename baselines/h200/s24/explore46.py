"""Session 24: the softmax kernels of 0b0b8b6 against those of c3d194a, forward and backward, called directly.

Run from the repository root, with c3d194a's kernels/softmax.py copied to OLD (git show c3d194a:kernels/softmax.py):
    python3 baselines/h200/s24/explore46.py OLD OUT.jsonl

0b0b8b6 changed: eviction hints on both reads of rows longer than a block (forward and backward), the output
multiplied by 1 / sum (every path), the split forward's statistics one exp an element, and split rows cut into
4K segments (SPLIT_PROGRAMS_PER_SM 8 -> 32, which the backward's split shares). `new-p8` is 0b0b8b6 with the
old 8 programs an SM (16K segments at 64 x 262144), to see which the backward wants. Each call is checked against
float64 (max error over max |ref| under 2e-2), then timed by bench.timing (L2 zeroed before each call), two rounds
alternating old and new.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time

import torch

from bench.timing import TimingConfig, time_cuda
from kernels import softmax as SM

COPY_GBPS = 4279.0
T0 = time.time()
SHAPES = [(64, 262144), (256, 65536), (1024, 16384), (4096, 4096), (1024, 4096), (4096, 16384), (16384, 4096),
          (65536, 768)]


def load(path: str):
    spec = importlib.util.spec_from_file_location("softmax_old", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def main(old_path: str, path: str):
    old = load(old_path)
    cfg = TimingConfig()
    variants = {"old": (old, 8), "new": (SM, 32), "new-p8": (SM, 8)}
    with open(path, "w") as out:
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
             triton=__import__("triton").__version__)
        for rows, dim in SHAPES:
            g = torch.Generator(device="cuda").manual_seed(0)
            x = (4 * torch.randn(rows, dim, device="cuda", generator=g)).bfloat16()
            dy = torch.randn(rows, dim, device="cuda", generator=g).bfloat16()
            ref = torch.softmax(x.double(), -1)
            split = SM.row_segments(rows, dim, x.device)[0] > 1
            names = [n for n in variants if split or n != "new-p8"]
            for name in names:
                module, per_sm = variants[name]
                module.SPLIT_PROGRAMS_PER_SM = per_sm
                y = module.softmax_fwd(x)
                dx = module.softmax_bwd(dy, y)
                yd = y.double()
                dx_ref = yd * (dy.double() - (yd * dy.double()).sum(-1, keepdim=True))
                errs = [float((y.double() - ref).abs().max() / ref.abs().max()),
                        float((dx.double() - dx_ref).abs().max() / dx_ref.abs().max())]
                emit(out, kind="check", shape=[rows, dim], variant=name, segments=module.row_segments(rows, dim, x.device),
                     err=errs, ok=max(errs) <= 2e-2)
            for rnd in range(2):
                for name in names:
                    module, per_sm = variants[name]
                    module.SPLIT_PROGRAMS_PER_SM = per_sm
                    y = module.softmax_fwd(x)
                    for mode, fn, nbytes in (("fwd", lambda: module.softmax_fwd(x), 4 * rows * dim),
                                             ("bwd", lambda: module.softmax_bwd(dy, y), 6 * rows * dim)):
                        us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                        emit(out, kind="time", shape=[rows, dim], variant=name, mode=mode, round=rnd,
                             us=round(us, 2), pct=round(100 * nbytes / (us * 1e-6) / 1e9 / COPY_GBPS, 1))
            SM.SPLIT_PROGRAMS_PER_SM = 32


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "explore46.jsonl")
