"""Session 44: why a copy of 32 MiB, timed by bench.timing under its zeroing L2 flush, read 18.3-18.5 us at some
shapes and 20.2-20.5 at others in one process (session 29's explore74 and session 42's explore115).

In both, the fast copies were the first shapes timed (the fewest rows: 64 x 262144 and 256 x 65536, 512 x 32768 in
between at 19.0) and the slow ones came later (1024 x 16384, 4096 x 4096), so shape and time were confounded. A
contiguous copy does not see the shape; what differs is what ran around it, which buffers it got, and when.
Here, in one process, bf16, explore115's sequence without its Gluon variants, three phases:
  forward   shapes 256 x 65536, 512 x 32768, 1024 x 16384, 4096 x 4096, each as explore115 made it (x = 3 * randn,
            the float64 reference, then y), timed in alternation: the library's softmax forward, torch.softmax and
            y.copy_(x), three rounds
  reversed  the same shapes in reverse order, new buffers, the same three calls, three rounds
  alone     the same shapes in forward order, new buffers, the copy alone, three rounds
Every `time` row carries the wall-clock time (`wall`, seconds since the epoch), to be read beside an nvidia-smi
trace of clocks, power and temperature taken alongside. One `check` row a shape and phase: the library's softmax
against float64 (largest difference over the largest value) and whether the copy equals x.

Run from the repository root: python3 baselines/h200/s44/explore118.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore118.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, command_line, emit  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import softmax as SM  # noqa: E402

SHAPES = [(256, 65536), (512, 32768), (1024, 16384), (4096, 4096)]
PHASES = {"forward": (False, True), "reversed": (True, True), "alone": (False, False)}  # (reverse, with softmaxes)


def make(rows: int, dim: int, dev: str):
    """x, y and the float64 reference, allocated in explore115's order."""
    g = torch.Generator(device=dev).manual_seed(0)
    x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
    ref = torch.softmax(x.double(), -1)
    y = torch.empty_like(x)
    return x, y, ref


def main():
    shapes, path, smoke = command_line(SHAPES)
    out, dev = begin(path, smoke)
    if smoke:
        shapes = [(3, 70), (5, 33)]
    kept = []  # every phase's buffers stay alive, so each phase's are new memory
    for phase, (reverse, softmaxes) in PHASES.items():
        for rows, dim in (shapes[::-1] if reverse else shapes):
            x, y, ref = make(rows, dim, dev)
            kept.append((x, y))
            got = SM.softmax_fwd(x).double()
            y.copy_(x)
            emit(out, kind="check", phase=phase, shape=[rows, dim], ptr=[x.data_ptr(), y.data_ptr()],
                 max_rel=float((got - ref).abs().max() / ref.abs().max()), copy_equal=bool(torch.equal(y, x)))
            del ref, got
            calls = {"copy": lambda x=x, y=y: y.copy_(x)}
            if softmaxes:
                calls = {"library": lambda x=x: SM.softmax_fwd(x), "torch.softmax": lambda x=x: torch.softmax(x, -1),
                         **calls}
            if smoke:
                for fn in calls.values():
                    fn()
                continue
            for rnd in range(3):
                for name, fn in calls.items():
                    s = time_call(fn, dev, TimingConfig()).summary()
                    emit(out, kind="time", phase=phase, round=rnd, shape=[rows, dim], impl=name,
                         median_us=round(s["median_ms"] * 1e3, 3), n=s["n"], wall=round(time.time(), 2))
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    main()
