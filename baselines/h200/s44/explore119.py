"""Session 44: is a 32 MiB copy's time under the zeroing L2 flush set by the data or by the buffers?

explore118 found y.copy_(x) at 18.5 us when x was made at 256 x 65536 and 20.2-20.4 at 1024 x 16384 and
4096 x 4096, in either order, with the same allocation sequence and steady clocks. A contiguous copy does not see
the shape, so either the values differ (x = 3 * randn from a seeded generator, drawn at each shape) or the memory
does. Here, bf16, in one process: x and y made at 256 x 65536 (pair A) and at 4096 x 4096 (pair B), as
explore118 made them. The `check` row says whether A's and B's values are the same element for element. Then,
three rounds each, the copy timed on
  A with A's values, A with B's values, B with B's values, B with A's values
(values moved in by a copy into x's memory, x keeping its buffer), and lastly A with A's values again.

Run from the repository root: python3 baselines/h200/s44/explore119.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s44/explore119.py --smoke   (CPU)
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


def main():
    _, path, smoke = command_line([])
    out, dev = begin(path, smoke)
    shapes = {"A": (3, 64), "B": (12, 16)} if smoke else {"A": (256, 65536), "B": (4096, 4096)}
    pairs = {k: make(rows, dim, dev)[:2] for k, (rows, dim) in shapes.items()}
    values = {k: x.clone().view(-1) for k, (x, _) in pairs.items()}
    emit(out, kind="check", same_values=bool(torch.equal(values["A"], values["B"])),
         differ=int((values["A"] != values["B"]).sum()), ptr={k: [x.data_ptr(), y.data_ptr()] for k, (x, y) in pairs.items()})
    for buf, data in (("A", "A"), ("A", "B"), ("B", "B"), ("B", "A"), ("A", "A")):
        x, y = pairs[buf]
        x.view(-1).copy_(values[data])
        y.copy_(x)
        assert torch.equal(y.view(-1), values[data])
        if smoke:
            continue
        for rnd in range(3):
            s = time_call(lambda: y.copy_(x), dev, TimingConfig()).summary()
            emit(out, kind="time", buffers=buf, values=data, round=rnd, shape=list(shapes[buf]),
                 median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])
    if smoke:
        print("smoke: every copy ran")


if __name__ == "__main__":
    main()
