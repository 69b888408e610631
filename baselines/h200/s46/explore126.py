"""Session 46: are explore125's flush-dependent small calls an artifact of how bench.timing times them?

Calls shorter than TimingConfig.graph_below_us (15 us) are timed by two CUDA graphs: A holds reps x (flush, call),
B holds reps x (flush), and a sample is (time(A) - time(B)) / reps. That charges the call with whatever it changes
in the flush after it: a call that left clean lines of its input in L2 makes the next flush write back less than
B's flushes do, and the two flushes (zeroing alone, the reset) start differently (a write against a read). The
guess: the call alone, timed from an event before it to one after it, does not depend on the flush the way the
difference does.

One process times a copy (Tensor.copy_) and the library's rmsnorm, layernorm and softmax forwards, bf16, at
1024 x 768, 4096 x 768, 1024 x 4096 and (a control above the graph threshold) 4096 x 4096, under each flush, three
ways, in two rounds:
  events      bench.timing with cuda_graph="never": events around each call, the stream held by a spin kernel
  graph diff  bench.timing with cuda_graph="always": the graph difference above
(both with max_time_s=4 instead of 10, so that the graph difference of a 2 us call stops sooner)
  graph ev    graph A alone, an external event recorded before and after each call inside it; a sample is one
              call's elapsed time (the median over samples from `REPLAYS` replays)

Run from the repository root: python3 baselines/h200/s46/explore126.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s46/explore126.py --smoke   (CPU)
"""
from __future__ import annotations

import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s45"))

from _explore import begin, emit  # noqa: E402
from explore125 import calls  # noqa: E402  (the same four calls at each shape)

from bench.timing import TimingConfig, l2_flusher, time_call  # noqa: E402

SHAPES = [(1024, 768), (4096, 768), (1024, 4096), (4096, 4096)]
ROUNDS = 2
REPLAYS = 20


def graph_events(fn, flush, reps: int, replays: int) -> list[float]:
    """Each call's own time (ms), from external events recorded around it inside a graph of reps x (flush, call)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True, external=True), torch.cuda.Event(enable_timing=True, external=True))
             for _ in range(reps)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for start, end in pairs:
            flush()
            start.record()
            fn()
            end.record()
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    out = []
    for _ in range(replays):
        graph.replay()
        torch.cuda.synchronize()
        out += [start.elapsed_time(end) for start, end in pairs]
    return out


def main() -> None:
    smoke = "--smoke" in sys.argv
    path = None if smoke else sys.argv[1]
    out, dev = begin(path, smoke)
    shapes = [(3, 70), (5, 33)] if smoke else SHAPES
    timed = calls(shapes, dev)
    for fn in timed.values():  # compile and autotune before anything is timed
        fn()
    if smoke:
        print("smoke: every call ran")
        return
    flusher = l2_flusher(torch.cuda.current_device())
    for rnd in range(ROUNDS):
        for flush_name, priorities in (("zero", False), ("reset", True)):
            flusher.priorities = priorities
            for (rows, dim, name), fn in timed.items():
                row = dict(kind="time", round=rnd, flush=flush_name, shape=[rows, dim], impl=name)
                for method, graph in (("events", "never"), ("graph diff", "always")):
                    t = time_call(fn, dev, TimingConfig(cuda_graph=graph, max_time_s=4.0))
                    s = t.summary()
                    emit(out, **row, method=method, timed_as=t.method, median_us=round(s["median_ms"] * 1e3, 3),
                         n=s["n"])
                ev = graph_events(fn, flusher, reps=25, replays=REPLAYS)
                emit(out, **row, method="graph ev", timed_as="graph_events",
                     median_us=round(statistics.median(ev) * 1e3, 3), n=len(ev),
                     p10_us=round(sorted(ev)[len(ev) // 10] * 1e3, 3), p90_us=round(sorted(ev)[len(ev) * 9 // 10] * 1e3, 3))
    flusher.priorities = True


if __name__ == "__main__":
    main()
