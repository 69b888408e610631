"""Session 56: where fp32 16K-wide layernorm rows should take one 16K chunk a pass on an H100. explore134 (the walk
copied, two rounds) found one 16K chunk at 32 warps as fast as torch.compile from 16384 rows (706.2 against 705.8
us, 2,799.7 against 2,800.3) and 0.5% behind at 4096 (183.4 against 182.4; the library's 4K chunks 184.6), but
slower than 4K at 1024 rows (52.2 against 51.6). Here explore131's loop times the library's own forward with the
chunk forced to 4K and to 16K in fp32 at 1024-4096 rows, beside compile and a copy of the same bytes.

Run from the repository root: python3 baselines/h100/explore135.py OUT_DIR   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h100/explore135.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import explore131 as E  # noqa: E402

E.CHUNKS = (4096, 16384)
E._caches = {c: {} for c in E.CHUNKS}
E.ROWS = {"fp32": (1024, 1536, 2048, 3072, 4096)}
E.DTYPES = {"fp32": torch.float32}

if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    E.main(args[0] if args else None, smoke)
    if args:  # explore131's loop names its file after itself
        os.replace(os.path.join(args[0], "explore131.jsonl"), os.path.join(args[0], "explore135.jsonl"))
