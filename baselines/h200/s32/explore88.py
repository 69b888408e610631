"""Session 32: what makes memory just returned to the driver and allocated again run slow (explore83)?

explore83 (session 31): a 2 GiB copy read 1.14-1.15 ms for ~50 ms after 24 GiB were returned (empty_cache) and x
and y allocated anew, 1.02-1.04 after, and 1.01-1.04 from the first call after a one-second idle: not the clocks.
10% of the bandwidth for 50 ms is about 21 GB, near the 24 GiB returned, as if the driver cleared the returned memory
in the background. Here the copy is timed call after call (medians of 10 ms windows) after: x and y allocated in a
fresh process (never-used memory); 24 GiB returned then x and y allocated at once; 6 GiB returned then allocated
(a quarter: a quarter of the window if the clearing scales with the memory returned); 24 GiB returned, 300 ms idle,
then allocated (a background clearing would be over); 24 GiB freed to the allocator's cache (not returned).

Run from the repository root: python3 baselines/h200/s32/explore88.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s32/explore88.py --smoke   (CPU: only the plumbing)
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


def windows(points, width_ms=10):
    """Medians of the calls in each `width_ms` window."""
    wins = {}
    for t, v in points:
        wins.setdefault(int(t // width_ms), []).append(v)
    return [round(sorted(v)[len(v) // 2], 4) for _, v in sorted(wins.items())]


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    shape, unit = ((64, 1024), 2**20) if smoke else ((65536, 16384), 2**30)
    cases = [("fresh process", 0, True, 0), ("24 GiB returned", 24, True, 0), ("6 GiB returned", 6, True, 0),
             ("24 GiB returned, 300 ms idle", 24, True, 300), ("24 GiB cached", 24, False, 0),
             ("24 GiB returned (again)", 24, True, 0)]
    for label, gib, give_back, idle_ms in cases:
        if gib:
            big = torch.empty(gib * unit, dtype=torch.uint8, device=dev)
            big.fill_(1)
            del big
            if give_back and dev == "cuda":
                torch.cuda.empty_cache()
            if dev == "cuda":
                torch.cuda.synchronize()
            time.sleep(idle_ms / 1e3)
        x = torch.empty(shape, dtype=torch.bfloat16, device=dev).normal_()
        y = torch.empty_like(x)
        first = series(x, y, 200, smoke)
        time.sleep(1.0)
        later = series(x, y, 100, smoke)
        emit(out, label=label, first_10ms_windows=windows(first), after_1s_windows=windows(later),
             first_calls=[round(v, 4) for _, v in first[:8]])
        del x, y
        if dev == "cuda":
            torch.cuda.synchronize()
            if label != "24 GiB cached":
                torch.cuda.empty_cache()
        time.sleep(1.0)


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
