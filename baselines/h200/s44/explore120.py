"""Session 44: does a memory-bound call's time under the zeroing L2 flush depend on how long the stream is held
between the flush and the call?

bench.timing zeroes a buffer twice L2's size before each sample, then holds the stream with a spin kernel for
1.5x the host's issue time of the call (+ 20 us), then times the call with events. The hold therefore differs
between calls and between runs of one call. explore118/119 saw one copy of 32 MiB read 18.5 us next to softmax
calls and 20.0-20.4 us elsewhere, with the same values and steady clocks. If L2 writes back the flush's dirty
lines while the spin runs, a longer hold leaves the call less to write back, and its time falls.

Here the timer's sample is rebuilt by hand with a fixed hold: flush, spin for HOLD us (none at 0), start event,
call, end event; 200 samples a hold and call, the median kept, the holds in alternation, three rounds. bf16,
4096 x 4096: the copy (y.copy_(x)), the library's rmsnorm forward (no statistics) and softmax forward into y,
and the library's rmsnorm backward (dx and dw new each call). A `check` row first: each call's output (dx for the
backward) against a float64 reference, the largest difference over the largest value, y filled with NaN before
each call. At hold 0 a sample may time the host too, where issuing the call takes longer than the flush (~25 us).

Run from the repository root: python3 baselines/h200/s44/explore120.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore120.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, command_line, emit, norm_inputs  # noqa: E402

from bench.timing import _spin_cycles, l2_flusher  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402

HOLDS_US = [0, 10, 20, 30, 50, 100, 200, 400]
SAMPLES = 200


def sample_median(fn, hold_us: float, flush) -> float:
    """The median device time (us) of fn over SAMPLES samples, each after a flush and a spin of hold_us."""
    cycles = _spin_cycles(hold_us / 1e3) if hold_us else 0
    times = []
    for _ in range(SAMPLES // 10):
        events = []
        for _ in range(10):
            flush()
            if cycles:
                torch.cuda._sleep(cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events.append((start, end))
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) * 1e3 for s, e in events]
    return statistics.median(times)


def rel(got, ref) -> float:
    return float((got.double() - ref).abs().max() / ref.abs().max())


def main():
    _, path, smoke = command_line([])
    out, dev = begin(path, smoke)
    rows, dim = (8, 64) if smoke else (4096, 4096)
    x, dy, w, _ = norm_inputs(rows, dim, dev)
    _, rstd = RN.rmsnorm_fwd(x, w)
    y = torch.empty_like(x)
    xd, wd = x.double(), w.double()
    r = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6)
    xhat = xd * r
    g = dy.double() * wd
    refs = {"copy": xd, "rmsnorm-fwd": xhat * wd, "softmax-fwd": torch.softmax(xd, -1),
            "rmsnorm-bwd": r * (g - xhat * (g * xhat).mean(-1, keepdim=True))}
    calls = {"copy": lambda: y.copy_(x),
             "rmsnorm-fwd": lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False),
             "softmax-fwd": lambda: SM.softmax_fwd(x, out=y),
             "rmsnorm-bwd": lambda: RN.rmsnorm_bwd(dy, x, w, rstd)}
    for name, fn in calls.items():
        y.fill_(float("nan"))
        got = fn()
        got = got[0] if isinstance(got, tuple) else got
        emit(out, kind="check", impl=name, max_rel=rel(got, refs[name]))
    del refs, xd, r, xhat, g
    if smoke:
        print("smoke: every call ran")
        return
    flush = l2_flusher(torch.cuda.current_device())
    for fn in calls.values():  # warm: compile and autotune stay out of the samples
        for _ in range(20):
            fn()
    for rnd in range(3):
        for name, fn in calls.items():
            for hold in HOLDS_US:
                emit(out, kind="time", round=rnd, impl=name, shape=[rows, dim], hold_us=hold,
                     median_us=round(sample_median(fn, hold, flush), 3))


if __name__ == "__main__":
    main()
