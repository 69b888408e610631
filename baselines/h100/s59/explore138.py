"""Session 59: explore136-137 (H100) found small calls 5-10% slower after any read-heavy pass before the zeroing
flush (a read of the flush buffer, of another buffer, the reset's claim), lasting through two more zeroings, with
the SM clock at 1980 MHz throughout and the mean power 190-340 W (of 700). Is that the state one flush leaves for
the call right after it, or the loop's average state (power, heat), which a flush only sets by its share of the
loop? Here the two flushes alternate sample by sample, and each sample is filed under the flush just before it:
if the two groups differ as blocks of one flush do, it is the flush just before; if they read alike, between the
blocks' values, it is the loop's average.

A plain loop (not bench.timing, whose flush cannot alternate): flush, a 100 us sleep kernel (the host enqueues the
call meanwhile), event, call, event. Per call: 1000 samples of zero alone, 1000 of read+zero, then 2000 alternating,
three rounds; medians.

Run from the repository root: python3 baselines/h100/s59/explore138.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import os
import statistics
import sys

import torch

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "baselines", "h200", "s40"))
sys.path.insert(0, os.path.join(ROOT, "baselines", "h200", "s46"))

from _explore import begin, emit  # noqa: E402
from explore128 import calls  # noqa: E402

from bench.timing import l2_flusher  # noqa: E402

SAMPLES = 1000
SLEEP_CYCLES = 200_000  # ~100 us at 1980 MHz


def sample(fn, flush) -> float:
    flush()
    torch.cuda._sleep(SLEEP_CYCLES)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3  # us


def main() -> None:
    out, dev = begin(sys.argv[1], False)
    timed = {k: v for k, v in calls(dev, False).items() if "4096x4096" not in k}
    buf = l2_flusher(torch.cuda.current_device()).buf
    sink = torch.zeros((), dtype=torch.int64, device=buf.device)
    zero = buf.zero_

    def read_zero():
        sink.copy_(buf.sum(dtype=torch.int64))
        buf.zero_()

    for fn in timed.values():
        for _ in range(50):
            sample(fn, zero)
    for rnd in range(3):
        for name, fn in timed.items():
            blocks = {"zero": [sample(fn, zero) for _ in range(SAMPLES)],
                      "read+zero": [sample(fn, read_zero) for _ in range(SAMPLES)]}
            alt = {"zero": [], "read+zero": []}
            for i in range(2 * SAMPLES):
                mode, flush = ("zero", zero) if i % 2 == 0 else ("read+zero", read_zero)
                alt[mode].append(sample(fn, flush))
            emit(out, kind="time", round=rnd, call=name,
                 **{f"block {m}": round(statistics.median(v), 3) for m, v in blocks.items()},
                 **{f"alternating {m}": round(statistics.median(v), 3) for m, v in alt.items()})


if __name__ == "__main__":
    main()
