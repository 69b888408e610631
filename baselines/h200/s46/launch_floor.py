"""Session 46: the roofline's launch floor, as the suite now times a call (events around it, stream held, L2
flushed: bench.calibrate._timed_kernel_s) and as it was taken until now (one add of a 200-add CUDA graph's replay,
the 20th-percentile replay). Three of each, in one process. Writes OUT.json.

Run from the repository root: python3 baselines/h200/s46/launch_floor.py OUT.json   (on a GPU)
"""
from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.calibrate import _timed_kernel_s  # noqa: E402
from bench.timing import time_fixed  # noqa: E402


def graph_kernel_s(kernels: int = 200) -> float:
    """The floor until session 46: one add's share of a graph of `kernels` adds."""
    x = torch.ones(1, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    samples = time_fixed(graph.replay, "cuda", iters=20, warmup=3)
    return sorted(samples)[len(samples) // 5] * 1e-3 / kernels


def main(path: str) -> None:
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "events_us": [round(_timed_kernel_s() * 1e6, 3) for _ in range(3)],
           "graph_us": [round(graph_kernel_s() * 1e6, 3) for _ in range(3)]}
    print(json.dumps(out))
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
