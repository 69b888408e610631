"""Session 44: a flush that leaves L2 as a plain zeroing leaves it when nothing was ever loaded with evict_last.

explore122: lines loaded with evict_last outlive bench.timing's flush (buf.zero_()), so a later "cold" sample of
any call on those bytes reads part of them from L2. Loading the flush buffer with evict_last first (claiming
every evict_last slot) and then zeroing it cleared most of that, but it also moved calls nothing had marked (copy
B 20.3-21.0 us against 20.9-21.1 under zero), perhaps because the flush's own lines keep evict_last.

Here one process that has not loaded anything with evict_last before its first measurement, bf16, 32 MiB pairs
A (256 x 65536, the one marked: all of x_A loaded with evict_last by a Triton kernel), B (4096 x 4096) and C
(256 x 65536), 200 samples a measurement (flush, a 30 us spin, events around the call; the median kept). Steps,
in this order:
  1. copy B and copy C under `zero` (buf.zero_()): the clean baseline, nothing marked yet
  2. under each flush below: copy B, copy C, then copy A after a mark, then copy B again
  3. copy B and copy C under `zero`, now after the marks and claims of step 2
Flushes:
  zero              buf.zero_()
  claim+zero        buf loaded with evict_last, then zeroed
  claim+demote+zero buf loaded with evict_last, every line of buf given evict_normal (PTX applypriority), zeroed
  claim+first+zero  buf loaded with evict_last, loaded again with evict_first, zeroed
The script is run three times, each a fresh process (a round each).

Run from the repository root: python3 baselines/h200/s44/explore123.py OUT.jsonl ROUND   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore123.py --smoke   (CPU; the
                              applypriority kernel is inline PTX, which the interpreter cannot run: left out)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, emit  # noqa: E402
from explore118 import make  # noqa: E402
from explore122 import BLOCK, Flushes, sample_median  # noqa: E402

LINE = 32  # int32 elements in a 128-byte line


@triton.jit
def _demote(buf, n_lines, LINES: tl.constexpr):
    """applypriority.global.L2::evict_normal on LINES 128-byte lines of buf a program."""
    line = tl.minimum(tl.program_id(0) * LINES + tl.arange(0, LINES), n_lines - 1)
    tl.inline_asm_elementwise("applypriority.global.L2::evict_normal [$1], 128;\n\tmov.u32 $0, 0;", "=r,l",
                              [buf + line.to(tl.int64) * 32], dtype=tl.int32, is_pure=False, pack=1)


class Flushes2(Flushes):
    def claim_zero(self):
        self.touch(self.buf, True)
        self.buf.zero_()

    def claim_demote_zero(self):
        self.touch(self.buf, True)
        n_lines = self.n // LINE
        _demote[(triton.cdiv(n_lines, 1024),)](self.buf, n_lines, LINES=1024)
        self.buf.zero_()

    def claim_first_zero(self):
        self.first_zero()


def main():
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out, dev = begin(args[0] if args else None, smoke)
    rnd = int(args[1]) if len(args) > 1 else 0
    (ra, da), (rb, db) = ((4, 64), (16, 16)) if smoke else ((256, 65536), (4096, 4096))
    xa, ya, _ = make(ra, da, dev)
    xb, yb, _ = make(rb, db, dev)
    xc, yc, _ = make(ra, da, dev)
    f = Flushes2(dev)
    flushes = {"zero": f.zero, "claim+zero": f.claim_zero, "claim+demote+zero": f.claim_demote_zero,
               "claim+first+zero": f.claim_first_zero}
    copies = {"B": lambda: yb.copy_(xb), "C": lambda: yc.copy_(xc), "A": lambda: ya.copy_(xa)}
    mark = lambda: f.touch(xa, True)  # noqa: E731
    if smoke:
        for name, flush in flushes.items():
            if name != "claim+demote+zero":
                flush()
        mark()
        for fn in copies.values():
            fn()
        ok = torch.equal(ya, xa) and torch.equal(yb, xb) and torch.equal(yc, xc) and int(f.buf.abs().max()) == 0
        emit(out, kind="check", copies_equal_and_buffer_zero=bool(ok))
        print("smoke: every flush but the inline-PTX one ran")
        return

    def time(step, flush, copy, marked=False):
        if marked:
            mark()
        emit(out, kind="time", round=rnd, step=step, flush=flush, impl=f"copy {copy}" + (" marked" if marked else ""),
             median_us=round(sample_median(copies[copy], flushes[flush]), 3))

    for _ in range(3):  # step 1 a few times: what the clean state gives, and whether it holds
        time(1, "zero", "B")
        time(1, "zero", "C")
    for name in flushes:
        time(2, name, "B")
        time(2, name, "C")
        time(2, name, "A", marked=True)
        time(2, name, "B")
    time(3, "zero", "B")
    time(3, "zero", "C")
    f.claim_demote_zero()
    torch.cuda.synchronize()
    ok = torch.equal(ya, xa) and torch.equal(yb, xb) and torch.equal(yc, xc) and int(f.buf.abs().max()) == 0
    emit(out, kind="check", copies_equal_and_buffer_zero=bool(ok))


if __name__ == "__main__":
    main()
