"""Session 43: how much a 16M-element goal point's time depends on where its buffers lie in memory.

In session 42 (explore115) a copy of the same 32 MiB, timed by bench.timing under its zeroing L2 flush, read
18.3-18.4 us at one shape and 20.2-20.5 at others in the same run; the lease probes of sessions 36-43 read 19.9-20.4.
Here, on one machine and one process, TRIALS fresh sets of buffers are allocated (the earlier sets kept alive, so
each set is new memory), and on each set the same calls are timed by bench.timing, bf16, 4096 x 4096:
  copy           out.copy_(x): 32 MiB in, 32 MiB out
  rmsnorm-fwd    the library's rmsnorm forward into out (no statistics kept), 85% of bandwidth: 18.45 us
  softmax-fwd    the library's softmax forward into out, 80%: 19.60 us
  rmsnorm-bwd    the library's rmsnorm backward of x, dy (dx and dw new each call), 70%: 33.6 us
  add            torch.add(x, dy, out=out): 64 MiB in, 32 MiB out
One `time` row per call and trial; one `check` row per trial with the buffers' addresses and whether every call's
output equalled the first trial's bit for bit (the same inputs give the same outputs wherever they lie). The
outputs are not filled with NaN first: this checks placement, not correctness, which the test suite covers.

Run from the repository root: python3 baselines/h200/s43/explore117.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s43/explore117.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, emit, norm_inputs  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402

TRIALS = 24


def main(path, smoke):
    out, dev = begin(path, smoke)
    rows, dim, trials = (8, 64, 2) if smoke else (4096, 4096, TRIALS)
    x0, dy0, w, _ = norm_inputs(rows, dim, dev)
    _, rstd = RN.rmsnorm_fwd(x0, w)
    kept, first = [], None
    for trial in range(trials):
        x, dy, o = x0.clone(), dy0.clone(), torch.empty_like(x0)
        kept.append((x, dy, o))
        calls = {"copy": lambda: o.copy_(x),
                 "rmsnorm-fwd": lambda: RN.rmsnorm_fwd(x, w, out=o, stats=False),
                 "softmax-fwd": lambda: SM.softmax_fwd(x, out=o),
                 "rmsnorm-bwd": lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 "add": lambda: torch.add(x, dy, out=o)}
        got = {}
        for name, fn in calls.items():
            res = fn()
            got[name] = [t.clone() for t in (res if isinstance(res, tuple) else (res,)) if t is not None]
        if first is None:
            first = got
        same = all(torch.equal(a, b) for k in got for a, b in zip(got[k], first[k]))
        emit(out, kind="check", trial=trial, ok=same, ptr=[x.data_ptr(), dy.data_ptr(), o.data_ptr()])
        if smoke:
            continue
        for name, fn in calls.items():
            s = time_call(fn, dev, TimingConfig()).summary()
            emit(out, kind="time", trial=trial, impl=name, shape=[rows, dim], median_us=round(s["median_ms"] * 1e3, 3),
                 n=s["n"])
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else None, "--smoke" in sys.argv)
