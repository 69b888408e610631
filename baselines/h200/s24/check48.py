"""Session 24: the library softmax on long rows in fp32 and bf16 against float64, forward and backward, on a GPU
(the suite's fp32 corners stop at 16K-wide rows; these take the split and the one-program-a-row paths).

Run from the repository root: python3 baselines/h200/s24/check48.py OUT.jsonl
"""
from __future__ import annotations

import json
import sys

import torch

from kernels import softmax as SM


def main(path: str):
    with open(path, "w") as out:
        for rows, dim in ((64, 262144), (256, 65536), (3, 100000), (200, 20001)):
            for dtype in (torch.float32, torch.bfloat16):
                g = torch.Generator(device="cuda").manual_seed(0)
                x = (4 * torch.randn(rows, dim, device="cuda", generator=g)).to(dtype)
                x[0, : dim // 3] = float("-inf")  # a row whose first third is masked out
                dy = torch.randn(rows, dim, device="cuda", generator=g).to(dtype)
                y = SM.softmax_fwd(x)
                dx = SM.softmax_bwd(dy, y)
                ref = torch.softmax(x.double(), -1)
                yd = y.double()
                dx_ref = yd * (dy.double() - (yd * dy.double()).sum(-1, keepdim=True))
                row = {"shape": [rows, dim], "dtype": str(dtype), "segments": SM.row_segments(rows, dim, x.device),
                       "fwd_rel_err": float((yd - ref).abs().max() / ref.abs().max()),
                       "bwd_rel_err": float((dx.double() - dx_ref).abs().max() / dx_ref.abs().max()),
                       "nan": bool(torch.isnan(y).any() or torch.isnan(dx).any())}
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "check48.jsonl")
