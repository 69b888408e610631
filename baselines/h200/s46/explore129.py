"""Session 46: a flush that is the reset followed by one more zeroing. explore128 showed the reset's slowdown of
some small calls against zeroing alone (layernorm 1024 x 4096 by 5-8%) is not a matter of time after the flush:
it stayed with 500 us of spin after it. So it is the state the reset leaves. Zeroing alone leaves L2 as a zeroing
that followed a zeroing leaves it; the reset leaves it as a zeroing that followed the claim's loads. One more
zeroing after the reset ends the same way zeroing alone does, and still starts from a claimed and demoted L2, so
lines loaded with evict_last should not survive it.

One process, bench.timing with events, bf16, under three flushes: zero (zeroing alone), reset (the library's),
reset+zero. For each, explore128's five calls, then the residue test of session 44 (explore122): x's bytes loaded
with evict_last (kernels.l2._claim_kernel on x), then a copy of x timed. Two rounds.

Run from the repository root: python3 baselines/h200/s46/explore129.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s46/explore129.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))
sys.path.insert(0, HERE)

from _explore import begin, emit, norm_inputs  # noqa: E402
from explore128 import calls  # noqa: E402

from bench import timing  # noqa: E402
from bench.timing import TimingConfig, l2_flusher, time_call  # noqa: E402

ROUNDS = 2


class Flush:
    """The library's flusher as `mode`: "zero", "reset", or "reset+zero" (the reset, then the buffer zeroed again)."""

    def __init__(self, inner):
        self.inner, self.mode, self.method = inner, "reset", "reset"

    def __call__(self):
        self.inner.priorities = self.mode != "zero"
        self.inner()
        if self.mode == "reset+zero":
            self.inner.buf.zero_()


@triton.jit
def _mark_kernel(X, SINK, n, BLOCK: tl.constexpr):
    """Loads BLOCK int32 of X with evict_last and stores their sum into SINK (X is not written)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(X + offs, mask=offs < n, other=0, eviction_policy="evict_last")
    tl.store(SINK + tl.program_id(0), tl.sum(v, 0))


def lay_residue(x: torch.Tensor) -> None:
    """x's bytes loaded with evict_last, as the long-row softmax's first pass loads them (session 44's mark)."""
    ints = x.view(torch.int32)
    sink = torch.empty(triton.cdiv(ints.numel(), 4096), dtype=torch.int32, device=x.device)
    _mark_kernel[(sink.numel(),)](ints, sink, ints.numel(), BLOCK=4096)


def main() -> None:
    smoke = "--smoke" in sys.argv
    path = None if smoke else sys.argv[1]
    out, dev = begin(path, smoke)
    timed = calls(dev, smoke)
    for fn in timed.values():
        fn()
    big = (5, 32) if smoke else (4096, 4096)
    x, _, _, _ = norm_inputs(*big, dev)
    y = torch.empty_like(x)
    if smoke:
        lay_residue(x)
        print("smoke: every call ran")
        return
    device = torch.cuda.current_device()
    inner = l2_flusher(device)
    flush = Flush(inner)
    timing._FLUSHERS[device] = flush
    cfg = TimingConfig(cuda_graph="never", max_time_s=4.0)
    for rnd in range(ROUNDS):
        for mode in ("zero", "reset", "reset+zero"):
            flush.mode = mode
            for name, fn in timed.items():
                s = time_call(fn, dev, cfg).summary()
                emit(out, kind="time", round=rnd, flush=mode, call=name, median_us=round(s["median_ms"] * 1e3, 3),
                     n=s["n"])
            lay_residue(x)
            torch.cuda.synchronize()
            s = time_call(lambda: y.copy_(x), dev, cfg).summary()
            emit(out, kind="time", round=rnd, flush=mode, call="copy of x after its residue (4096x4096)",
                 median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])
    inner.priorities = True
    timing._FLUSHERS[device] = inner


if __name__ == "__main__":
    main()
