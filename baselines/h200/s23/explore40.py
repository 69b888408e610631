"""Session 23: the norm backwards with the partial-row sum launched as a programmatic dependent launch (PDL).

Run from the repository root at a0ce764 (the variants below were removed after it): python3
baselines/h200/s23/explore40.py OUT.jsonl

Variants (kernels._rows.DEPENDENT_SUM, EARLY_TRIGGER):
  off    the sum launched plainly, after the backward kernel has finished (as before this session)
  pdl    the sum launched as a dependent; the backward kernel triggers only by finishing
  early  the sum launched as a dependent; the backward kernel triggers at its start
For every (norm, shape): dx, dw (and db) of each variant are compared bit for bit with `off`'s, 20 times each
after an L2 flush and once more through a CUDA graph of three calls (the bench replays calls shorter than 15 us
that way); then each variant is timed by bench.timing, in two rounds, alternating.
"""
from __future__ import annotations

import json
import sys
import time

import torch

from bench.timing import TimingConfig, l2_flusher, time_cuda
from kernels import _rows
from kernels import layernorm as LN
from kernels import rmsnorm as RN

VARIANTS = {"off": (False, False), "pdl": (True, False), "early": (True, True)}
SHAPES = [(4096, 4096), (1024, 16384), (4096, 16384), (16384, 4096), (16384, 16384), (1024, 768), (16384, 768),
          (65536, 768)]
COPY_GBPS = 4279.0  # baselines/h200/calibration.json
T0 = time.time()


def backward(norm: str, rows: int, dim: int):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, dim, device="cuda", generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device="cuda", generator=g)).bfloat16()
    dy = torch.randn(rows, dim, device="cuda", generator=g).bfloat16()
    if norm == "rmsnorm":
        _, rstd = RN.rmsnorm_fwd(x, w)
        return lambda: RN.rmsnorm_bwd(dy, x, w, rstd), (3 * rows * dim + 2 * dim) * 2
    b = (0.1 * torch.randn(dim, device="cuda", generator=g)).bfloat16()
    _, mean, rstd = LN.layernorm_fwd(x, w, b)
    return lambda: LN.layernorm_bwd(dy, x, w, mean, rstd), (3 * rows * dim + 3 * dim) * 2


def use(variant: str):
    _rows.DEPENDENT_SUM, _rows.EARLY_TRIGGER = VARIANTS[variant]


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def check(fn, want) -> tuple[int, bool]:
    """(calls whose outputs differ from `want` bit for bit, whether a graph of three calls matched too)."""
    flush = l2_flusher(torch.cuda.current_device())
    bad = 0
    for _ in range(20):
        flush()
        got = fn()
        torch.cuda.synchronize()
        bad += any(not torch.equal(a, b) for a, b in zip(got, want))
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm the allocator's pool on this stream
        with torch.cuda.graph(graph, stream=stream):
            outs = [fn() for _ in range(3)]
    torch.cuda.current_stream().wait_stream(stream)
    flush()
    graph.replay()
    torch.cuda.synchronize()
    graph_ok = all(torch.equal(a, b) for got in outs for a, b in zip(got, want))
    return bad, graph_ok


def main(path: str):
    cfg = TimingConfig()
    with open(path, "w") as out:
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
             triton=__import__("triton").__version__)
        for norm in ("rmsnorm", "layernorm"):
            for rows, dim in SHAPES:
                fn, nbytes = backward(norm, rows, dim)
                use("off")
                want = [t.clone() for t in fn()]  # also autotunes the backward kernel
                torch.cuda.synchronize()
                for variant in ("pdl", "early"):
                    use(variant)
                    bad, graph_ok = check(fn, want)
                    emit(out, kind="check", norm=norm, shape=[rows, dim], variant=variant, bad_calls=bad,
                         graph_ok=graph_ok)
                for rnd in range(2):
                    for variant in VARIANTS:
                        use(variant)
                        timing = time_cuda(fn, cfg)
                        us = timing.summary()["median_ms"] * 1e3
                        emit(out, kind="time", norm=norm, shape=[rows, dim], variant=variant, round=rnd,
                             us=round(us, 2), pct=round(100 * nbytes / (us * 1e-6) / 1e9 / COPY_GBPS, 1),
                             method=timing.method)
                del fn, want
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "explore40.jsonl")
