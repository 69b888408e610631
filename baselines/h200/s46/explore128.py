"""Session 46: does the reset's slowdown of some small calls (explore126, under events: layernorm 1024 x 4096
9.28-9.38 us after the reset, 8.74-8.80 after zeroing alone) need the call to follow its flush closely? Under ncu,
with a pause between the two, it was gone (explore127).

One process times, through bench.timing with events (cuda_graph="never"), a copy and the library's forwards, bf16,
under each flush, with a spin of GAP microseconds added after the flush (before the spin that holds the stream),
for each GAP in GAPS, in two rounds.

Run from the repository root: python3 baselines/h200/s46/explore128.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s46/explore128.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, emit, norm_inputs  # noqa: E402

from bench import timing  # noqa: E402
from bench.timing import TimingConfig, l2_flusher, time_call  # noqa: E402
from kernels.layernorm import layernorm_fwd  # noqa: E402
from kernels.rmsnorm import rmsnorm_fwd  # noqa: E402

GAPS_US = [0, 20, 100, 500]
ROUNDS = 2


def calls(dev, smoke: bool) -> dict:
    """{name: fn}: explore126's calls that moved with the flush, one that did not, and two at 4096 x 4096."""
    small, big = ((3, 70), (5, 33)) if smoke else ((1024, 768), (4096, 4096))
    mid = (4, 40) if smoke else (1024, 4096)
    out = {}
    xm, _, wm, bm = norm_inputs(*mid, dev)
    ym = torch.empty_like(xm)
    out["layernorm %dx%d" % mid] = lambda: layernorm_fwd(xm, wm, bm, out=ym, stats=False)
    xs, _, ws, _ = norm_inputs(*small, dev)
    ys = torch.empty_like(xs)
    out["copy %dx%d" % small] = lambda: ys.copy_(xs)
    out["rmsnorm %dx%d" % small] = lambda: rmsnorm_fwd(xs, ws, out=ys, stats=False)
    xb, _, wb, bb = norm_inputs(*big, dev)
    yb = torch.empty_like(xb)
    out["copy %dx%d" % big] = lambda: yb.copy_(xb)
    out["layernorm %dx%d" % big] = lambda: layernorm_fwd(xb, wb, bb, out=yb, stats=False)
    return out


class GapFlusher:
    """The library's flusher, then a spin of `gap_us` (as bench.timing spins to hold the stream)."""

    def __init__(self, inner):
        self.inner, self.method, self.cycles = inner, inner.method, 0

    def __call__(self):
        self.inner()
        if self.cycles:
            torch.cuda._sleep(self.cycles)


def main() -> None:
    smoke = "--smoke" in sys.argv
    path = None if smoke else sys.argv[1]
    out, dev = begin(path, smoke)
    timed = calls(dev, smoke)
    for fn in timed.values():  # compile and autotune before anything is timed
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    device = torch.cuda.current_device()
    inner = l2_flusher(device)
    gap = GapFlusher(inner)
    timing._FLUSHERS[device] = gap  # time_call takes the process's flusher from here
    for rnd in range(ROUNDS):
        for gap_us in GAPS_US:
            gap.cycles = timing._spin_cycles(gap_us / 1e3) if gap_us else 0
            for flush, priorities in (("zero", False), ("reset", True)):
                inner.priorities = priorities
                for name, fn in timed.items():
                    s = time_call(fn, dev, TimingConfig(cuda_graph="never", max_time_s=4.0)).summary()
                    emit(out, kind="time", round=rnd, gap_us=gap_us, flush=flush, call=name,
                         median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])
    inner.priorities = True
    timing._FLUSHERS[device] = inner


if __name__ == "__main__":
    main()
