"""Session 44: do lines loaded with evict_last outlive the zeroing L2 flush, and which flush clears them?

explore121: after the library's softmax of a 256 x 65536 x (its first pass loads x with evict_last, so the second
finds it in L2), copies of x read 18.6-18.7 us under bench.timing, against 20.2-20.3 after any other call, through
the copy's own warmup and 2000 samples, each after a flush. If the flush's plain stores cannot evict evict_last
lines, part of x stays in L2 for every later "cold" sample of any call on x.

Here, bf16, x and y 32 MiB each: pairs A and C (256 x 65536) and B (4096 x 4096); only x_A is ever loaded with
evict_last. Before some measurements a residue is laid (`mark`: a Triton kernel that loads all of x_A with
evict_last); then 200
samples a measurement (flush, a 30 us spin, events around the call; the median kept), with each flush:
  zero        bench.timing's: buf.zero_()
  last+zero   a Triton kernel loads all of buf with evict_last, then buf.zero_()
  store-last  a Triton kernel stores zeros over buf with evict_last
  first+zero  loads of buf with evict_last, then again with evict_first, then buf.zero_()
  reset+zero  cuCtxResetPersistingL2Cache (driver, host side, the device synchronized first), then buf.zero_()
Calls: copy A after a mark, copy C and copy B (no mark; x_A's residue from earlier marks, if any, still there), and
the library's softmax of x_A after a mark. Three rounds. A flush that clears the residue gives copy A the time of
copy C, and copy B and C the times they have under `zero` where nothing was marked (explore121: 20.2-20.6 us).

Run from the repository root: python3 baselines/h200/s44/explore122.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore122.py --smoke   (CPU)
"""
from __future__ import annotations

import ctypes
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, command_line, emit  # noqa: E402
from explore118 import make  # noqa: E402

from bench.timing import _spin_cycles  # noqa: E402
from kernels import softmax as SM  # noqa: E402

SAMPLES = 200
BLOCK = 4096


@triton.jit
def _touch(buf, sink, n, BLOCK: tl.constexpr, LAST: tl.constexpr):
    """Loads buf[pid * BLOCK: ...] with evict_last (LAST) or evict_first; one sum a program into sink."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if LAST:
        v = tl.load(buf + offs, mask=offs < n, other=0, eviction_policy="evict_last")
    else:
        v = tl.load(buf + offs, mask=offs < n, other=0, eviction_policy="evict_first")
    tl.store(sink + tl.program_id(0), tl.sum(v.to(tl.int32), 0))


@triton.jit
def _zero_last(buf, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(buf + offs, tl.zeros([BLOCK], dtype=tl.int32), mask=offs < n, eviction_policy="evict_last")


class Flushes:
    def __init__(self, dev: str):
        l2 = torch.cuda.get_device_properties(dev).L2_cache_size if dev == "cuda" else 2**20
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=dev)
        self.n = self.buf.numel()
        self.grid = (triton.cdiv(self.n, BLOCK),)
        self.sink = torch.empty(self.grid[0], dtype=torch.int32, device=dev)
        self.cuda = ctypes.CDLL("libcuda.so.1") if dev == "cuda" else None

    def touch(self, t: torch.Tensor, last: bool):
        flat = t.view(-1).view(torch.int32) if t.element_size() * t.numel() % 4 == 0 else t.view(-1)
        grid = (triton.cdiv(flat.numel(), BLOCK),)
        sink = self.sink if grid[0] <= self.sink.numel() else torch.empty(grid[0], dtype=torch.int32, device=t.device)
        _touch[grid](flat, sink, flat.numel(), BLOCK=BLOCK, LAST=last)

    def zero(self):
        self.buf.zero_()

    def last_zero(self):
        self.touch(self.buf, True)
        self.buf.zero_()

    def store_last(self):
        _zero_last[self.grid](self.buf, self.n, BLOCK=BLOCK)

    def first_zero(self):
        self.touch(self.buf, True)
        self.touch(self.buf, False)
        self.buf.zero_()

    def reset_zero(self):
        torch.cuda.synchronize()
        rc = self.cuda.cuCtxResetPersistingL2Cache()
        assert rc == 0, f"cuCtxResetPersistingL2Cache returned {rc}"
        self.buf.zero_()


def sample_median(fn, flush, hold_us: float = 30.0) -> float:
    cycles = _spin_cycles(hold_us / 1e3)
    times = []
    for _ in range(SAMPLES // 10):
        events = []
        for _ in range(10):
            flush()
            torch.cuda._sleep(cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events.append((start, end))
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) * 1e3 for s, e in events]
    return statistics.median(times)


def main():
    _, path, smoke = command_line([])
    out, dev = begin(path, smoke)
    (ra, da), (rb, db) = ((4, 64), (16, 16)) if smoke else ((256, 65536), (4096, 4096))
    xa, ya, _ = make(ra, da, dev)
    xb, yb, _ = make(rb, db, dev)
    xc, yc, _ = make(ra, da, dev)
    f = Flushes(dev)
    flushes = {"zero": f.zero, "last+zero": f.last_zero, "store-last": f.store_last, "first+zero": f.first_zero,
               "reset+zero": f.reset_zero}
    mark = lambda: f.touch(xa, True)  # noqa: E731
    calls = {"copy A marked": (True, lambda: ya.copy_(xa)), "copy C": (False, lambda: yc.copy_(xc)),
             "copy B": (False, lambda: yb.copy_(xb)), "library softmax A marked": (True, lambda: SM.softmax_fwd(xa))}
    for name, flush in flushes.items():  # each flush once, and each call: they run and the copies are right
        if smoke and name == "reset+zero":
            continue
        flush()
        mark()
        for _, fn in calls.values():
            fn()
    ok = torch.equal(ya, xa) and torch.equal(yb, xb) and torch.equal(yc, xc) and int(f.buf.abs().max()) == 0
    emit(out, kind="check", copies_equal_and_buffer_zero=bool(ok),
         softmax_max_rel=float((SM.softmax_fwd(xa).double() - torch.softmax(xa.double(), -1)).abs().max()))
    if smoke:
        print("smoke: every flush and call ran")
        return
    for rnd in range(3):
        for name, flush in flushes.items():
            for call, (marked, fn) in calls.items():
                if marked:
                    mark()
                emit(out, kind="time", round=rnd, flush=name, impl=call, median_us=round(sample_median(fn, flush), 3))


if __name__ == "__main__":
    main()
