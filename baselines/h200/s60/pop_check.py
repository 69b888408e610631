"""Session 60: on a GPU, a backward that raises inside bench.profiling.backward_in_ranges leaves no range open on
autograd's worker thread. The push/pop calls are counted per thread (NVTX reports no depth without a tool attached);
the check is that the one-node backward `_pop_on` runs lands on the thread that ran the failing backward's first
node, so the two names pushed there are popped there. Then with `_pop_on` disabled, as before session 60: they stay.

Run from the repository root on a GPU: python3 baselines/h200/s60/pop_check.py
"""
from __future__ import annotations

import threading
import warnings

import torch

from bench import profiling

depth: dict[int, int] = {}


def push(name):
    depth[threading.get_ident()] = depth.get(threading.get_ident(), 0) + 1


def pop():
    depth[threading.get_ident()] -= 1


class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("boom")


def failing_backward() -> None:
    x = torch.ones(1024, device="cuda", requires_grad=True)
    y = Boom.apply(x).sum()
    with profiling.nvtx_range("call"), profiling.nvtx_range("backward"):
        try:
            with profiling.backward_in_ranges([y]):
                y.backward()
        except RuntimeError as e:
            assert "boom" in str(e)


def main() -> None:
    profiling._push, profiling._pop = push, pop
    me = threading.get_ident()
    failing_backward()
    workers = {t: d for t, d in depth.items() if t != me}
    print("with _pop_on: caller depth", depth[me], "worker threads' depths", list(workers.values()))
    assert depth[me] == 0 and len(workers) == 1 and list(workers.values()) == [0], depth
    profiling._pop_on = lambda thread, device, count: False
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        failing_backward()
    workers = {t: d for t, d in depth.items() if t != me}
    print("without it: worker threads' depths", list(workers.values()), "warned:", [str(w.message)[:60] for w in said])
    print("pop_check: ok")


if __name__ == "__main__":
    main()
