"""Session 31: does a kernel run slow right after large allocations are returned to the driver and made again?

explore82: the autotuners' benchmark read both 65536 x 16384 configs 8-15% slow (every sample, about 50 ms) when it
ran right after new inputs were allocated, and as the bench reads them a second later. bench's worker returns its
cached memory to the driver (torch.cuda.empty_cache) after every case, and a triton case tunes inside its first
call, right after allocating its inputs and outputs. Here a copy of 2 GiB (bf16 65536 x 16384 into a tensor of the
same shape, as large as those kernels' traffic) is timed call after call (events, each call waited on) for 600 ms:
after 24 GiB were allocated, written, freed and returned (empty_cache) and x and y allocated anew; the same without
empty_cache (the allocator's cache reused); and the same again one second later.

Run from the repository root: python3 baselines/h200/s31/explore83.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s31/explore83.py --smoke   (CPU: only the plumbing)
"""
from __future__ import annotations

import json
import sys
import time

import torch

T0 = time.time()


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def series(x, y, ms, smoke):
    """(ms since start, ms of one copy) for each call over `ms` of wall time."""
    out, t0 = [], time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < ms:
        if smoke:
            h = time.perf_counter()
            y.copy_(x)
            out.append(((h - t0) * 1e3, (time.perf_counter() - h) * 1e3))
            continue
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h = time.perf_counter()
        s.record()
        y.copy_(x)
        e.record()
        e.synchronize()
        out.append(((h - t0) * 1e3, s.elapsed_time(e)))
    return out


def summary(points):
    """Medians of the calls in each 50 ms window."""
    wins = {}
    for t, v in points:
        wins.setdefault(int(t // 50), []).append(v)
    return [round(sorted(v)[len(v) // 2], 4) for _, v in sorted(wins.items())]


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    shape, big_gib = ((64, 1024), 0.01) if smoke else ((65536, 16384), 24)
    for label, give_back in (("empty_cache", True), ("cache kept", False), ("empty_cache", True)):
        big = torch.empty(int(big_gib * 2**30), dtype=torch.uint8, device=dev)
        big.fill_(1)
        del big
        if give_back and dev == "cuda":
            torch.cuda.empty_cache()
        if dev == "cuda":
            torch.cuda.synchronize()
        x = torch.empty(shape, dtype=torch.bfloat16, device=dev).normal_()
        y = torch.empty_like(x)
        first = series(x, y, 600, smoke)
        time.sleep(1.0)
        later = series(x, y, 300, smoke)
        emit(out, label=label, first_50ms_windows=summary(first), after_1s_windows=summary(later),
             first_calls=[round(v, 4) for _, v in first[:12]])
        del x, y
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        time.sleep(1.0)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
