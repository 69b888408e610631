"""Session 45: why small calls read 5-25% slower in the norms suite under the reset flush than under zeroing alone.

Session 38's suite (zeroing alone) against this session's (the reset of session 44) moved 29 rows slower by more
than 5%, all of them calls of 5-37 us at 1024-4096 rows, every implementation alike. The guess: under zeroing
alone, lines that any earlier kernel in the process had loaded with evict_last (the suite's long-row kernels, the
flush's first claim) stay in L2, clean, holding part of it, so fewer of L2's lines are dirty after the flush and
the timed call writes fewer back. The reset claims and demotes them, so all of L2 is dirty again before each call.

Each process, three of them (fresh, so nothing of an earlier one's lines is left), times, through bench.timing
(TimingConfig's defaults), a copy, and the library's rmsnorm, layernorm and softmax forwards, bf16, at 1024 x 768,
4096 x 768 and 1024 x 4096, in four steps:
  zero            zeroing alone, before anything has loaded a large buffer with evict_last
  reset           the library's flush
  zero after      one claim (kernels.l2._claim_kernel: evict_last loads) of a separate 64 MiB buffer, never
                  demoted, then zeroing alone
  reset after     the library's flush again, the claimed buffer still there

Run from the repository root: python3 baselines/h200/s45/explore125.py OUT.jsonl   (on a GPU; runs three
                              processes of itself, each with --child)
                              TRITON_INTERPRET=1 python3 baselines/h200/s45/explore125.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import subprocess
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))

from _explore import begin, emit, norm_inputs  # noqa: E402

from bench.timing import TimingConfig, l2_flusher, time_call  # noqa: E402
from kernels import l2  # noqa: E402
from kernels.layernorm import layernorm_fwd  # noqa: E402
from kernels.rmsnorm import rmsnorm_fwd  # noqa: E402
from kernels.softmax import softmax_fwd  # noqa: E402

SHAPES = [(1024, 768), (4096, 768), (1024, 4096)]
PROCESSES = 3


def calls(shapes, dev) -> dict:
    """{(rows, dim, name): fn} for the four calls at each shape."""
    out = {}
    for rows, dim in shapes:
        x, _, w, b = norm_inputs(rows, dim, dev)
        y = torch.empty_like(x)
        out[(rows, dim, "copy")] = lambda x=x, y=y: y.copy_(x)
        out[(rows, dim, "rmsnorm")] = lambda x=x, w=w, y=y: rmsnorm_fwd(x, w, out=y, stats=False)
        out[(rows, dim, "layernorm")] = lambda x=x, w=w, b=b, y=y: layernorm_fwd(x, w, b, out=y, stats=False)
        out[(rows, dim, "softmax")] = lambda x=x, y=y: softmax_fwd(x, out=y)
    return out


def child(path: str | None, process: int, smoke: bool) -> None:
    out, dev = begin(path, smoke)
    shapes = [(3, 70), (5, 33)] if smoke else SHAPES
    timed = calls(shapes, dev)
    for fn in timed.values():  # compile and autotune before anything is timed
        fn()
    other = torch.zeros((64 if not smoke else 1) * 2**20 // 4, dtype=torch.int32, device=dev)
    if smoke:
        l2._claim_kernel[(triton.cdiv(other.numel(), 4096),)](other, other.numel(), BLOCK=4096)
        print("smoke: every call ran")
        return
    flusher = l2_flusher(torch.cuda.current_device())
    for step, priorities, claim in (("zero", False, False), ("reset", True, False), ("zero after", False, True),
                                    ("reset after", True, False)):
        if claim:
            l2._claim_kernel[(triton.cdiv(other.numel(), 4096),)](other, other.numel(), BLOCK=4096)
            torch.cuda.synchronize()
        flusher.priorities = priorities
        for (rows, dim, name), fn in timed.items():
            s = time_call(fn, dev, TimingConfig()).summary()
            emit(out, kind="time", process=process, step=step, shape=[rows, dim], impl=name,
                 median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])


def main() -> None:
    if "--child" in sys.argv:
        args = [a for a in sys.argv[1:] if a != "--child"]
        child(args[1], int(args[0]), False)
    elif "--smoke" in sys.argv:
        child(None, 0, True)
    else:
        path = sys.argv[1]
        for p in range(PROCESSES):
            part = f"{path}.{p}"
            subprocess.run([sys.executable, __file__, "--child", str(p), part], check=True)
        with open(path, "w") as f:
            for p in range(PROCESSES):
                f.write(open(f"{path}.{p}").read())
                os.remove(f"{path}.{p}")


if __name__ == "__main__":
    main()
