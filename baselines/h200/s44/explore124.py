"""Session 44: explore121 again, through bench.timing with its new flush (kernels.l2.reset_l2: claim with
evict_last, reset every line to normal priority, zero).

Under the old flush (zeroing alone) a copy of x_A read 18.6-18.7 us after the library's long-row softmax of x_A had
been timed, and 20.2-20.3 after anything else. With the reset, copy A should read the same whatever was timed
before it. Steps, three rounds, each call one bench.timing measurement (TimingConfig's defaults), bf16, 32 MiB:
  none               copy A, copy B
  library A          the library's softmax of x_A (256 x 65536, x loaded with evict_last), then copy A, copy B
  rmsnorm A as 16K   the library's rmsnorm forward of x_A viewed as 1024 x 16384 (the two-pass path, x loaded
                     with evict_last), then copy A, copy B

Run from the repository root: python3 baselines/h200/s44/explore124.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore124.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, command_line, emit  # noqa: E402
from explore118 import make  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402


def main():
    _, path, smoke = command_line([])
    out, dev = begin(path, smoke)
    (ra, da), (rb, db), wide = ((4, 64), (16, 16), (2, 128)) if smoke else ((256, 65536), (4096, 4096), (1024, 16384))
    xa, ya, _ = make(ra, da, dev)
    xb, yb, _ = make(rb, db, dev)
    w = torch.ones(wide[1], dtype=xa.dtype, device=dev)
    before = {"none": None, "library A": lambda: SM.softmax_fwd(xa),
              "rmsnorm A as 16K": lambda: RN.rmsnorm_fwd(xa.view(wide), w, stats=False)}
    copies = {"copy A": lambda: ya.copy_(xa), "copy B": lambda: yb.copy_(xb)}
    for fn in [f for f in before.values() if f] + list(copies.values()):
        fn()
    emit(out, kind="check", copies_equal=bool(torch.equal(ya, xa) and torch.equal(yb, xb)))
    if smoke:
        print("smoke: every call ran")
        return
    for rnd in range(3):
        for step, first in before.items():
            for name, fn in (({step: first} if first else {}) | copies).items():
                s = time_call(fn, dev, TimingConfig()).summary()
                emit(out, kind="time", round=rnd, step=step, impl=name, median_us=round(s["median_ms"] * 1e3, 3),
                     n=s["n"])


if __name__ == "__main__":
    main()
