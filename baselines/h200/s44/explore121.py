"""Session 44: does a 32 MiB copy's time under bench.timing depend on the call timed before it?

explore118 timed y.copy_(x) at 18.5 us when it came after the softmax calls of a 256 x 65536 x (19.5 when the copy
was timed alone at that shape, 20.0-20.1 in explore119), and at 20.2-20.4 after those of 1024 x 16384 and
4096 x 4096. explore119 ruled out the values; explore120 ruled out a longer hold after the flush (longer was slower).
Here, bf16, one process: pairs A (x, y made at 256 x 65536) and B (at 4096 x 4096) as explore118 made them, and,
three rounds, each step one bench.timing call (TimingConfig's defaults):
  none                     copy A, copy B
  torch.softmax A          torch.softmax(xA), then copy A, copy B
  library A                the library's softmax forward of xA, then copy A, copy B
  torch.softmax A as 4096  torch.softmax(xA viewed as 4096 x 4096), then copy A, copy B
  torch.softmax B          torch.softmax(xB), then copy A, copy B
  library B                the library's softmax forward of xB, then copy A, copy B
`time` rows carry the median and the host's median time to issue the call (cpu_us).

Run from the repository root: python3 baselines/h200/s44/explore121.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore121.py --smoke   (CPU)
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
from kernels import softmax as SM  # noqa: E402


def main():
    _, path, smoke = command_line([])
    out, dev = begin(path, smoke)
    (ra, da), (rb, db) = ((4, 64), (16, 16)) if smoke else ((256, 65536), (4096, 4096))
    xa, ya, _ = make(ra, da, dev)
    xb, yb, _ = make(rb, db, dev)
    before = {"none": None,
              "torch.softmax A": lambda: torch.softmax(xa, -1),
              "library A": lambda: SM.softmax_fwd(xa),
              "torch.softmax A as 4096": lambda: torch.softmax(xa.view(rb, db), -1),
              "torch.softmax B": lambda: torch.softmax(xb, -1),
              "library B": lambda: SM.softmax_fwd(xb)}
    copies = {"copy A": lambda: ya.copy_(xa), "copy B": lambda: yb.copy_(xb)}
    for fn in [f for f in before.values() if f] + list(copies.values()):
        fn()
    torch.cuda.synchronize() if dev == "cuda" else None
    emit(out, kind="check", copies_equal=bool(torch.equal(ya, xa) and torch.equal(yb, xb)))
    if smoke:
        print("smoke: every call ran")
        return
    for rnd in range(3):
        for step, first in before.items():
            calls = ({step: first} if first else {}) | copies
            for name, fn in calls.items():
                s = time_call(fn, dev, TimingConfig()).summary()
                emit(out, kind="time", round=rnd, step=step, impl=name, median_us=round(s["median_ms"] * 1e3, 3),
                     cpu_us=round(s["cpu_ms"] * 1e3, 1), n=s["n"])


if __name__ == "__main__":
    main()
