"""Session 32: why the autotuner reads a 32 MiB forward 8-9% below the bench inside a suite run, not alone.

In `norms-fwd-4096sq.jsonl` (this session, `bench run` at 4096 x 4096 bf16, every implementation) the autotuner's
reading of its pick was 0.910-0.921 of the bench's median (rmsnorm 19.71 against 21.66 us, below the run's copy
probe, 20.16); explore85 timed the same kernel alone under both timing configs and read 21.1-21.3 under each.
Here bench's worker measures rmsnorm 4096 x 4096 bf16 fwd as `bench run` does (eager, builtin, compile, triton),
then triton twice more with the autotuners' caches cleared (so it tunes again, at the same point), then triton
after a copy of 64 MiB timed under the autotuners' config; every autotuner benchmark call is logged (the config's
median and its samples' spread).

Run from the repository root: python3 baselines/h200/s32/explore91.py OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench import execute  # noqa: E402
from bench.execute import Case, Worker  # noqa: E402
from bench.timing import AUTOTUNE_TIMING, TimingConfig, time_call, time_cuda  # noqa: E402
from kernels import _autotune  # noqa: E402

LOG = []


def emit(out, **row):
    row["t"] = round(time.time() - T0, 2)
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def logged_bench(fn, quantiles=None, **_):
    s = time_cuda(fn, AUTOTUNE_TIMING).samples_ms
    LOG.append({"t": round(time.time() - T0, 3), "median_us": round(statistics.median(s) * 1e3, 3), "n": len(s),
                "min_us": round(min(s) * 1e3, 3), "max_us": round(max(s) * 1e3, 3)})
    return statistics.median(s)


def main(path):
    out = open(path, "w")
    worker = Worker("cuda", TimingConfig())
    _autotune.set_benchmark(logged_bench)
    point = {"tokens": 4096, "dim": 4096}
    steps = ["eager", "builtin", "compile", "triton", "triton again", "triton again", "copy then triton",
             "triton reloaded", "triton again", "triton reloaded"]
    for step in steps:
        if step != "triton":
            for tuner in execute._autotuners():
                tuner.cache.clear()
        if step == "triton reloaded":  # the compiled kernels dropped: loaded again from Triton's disk cache
            for tuner in execute._autotuners():
                for caches in tuner.fn.device_caches.values():
                    caches[0].clear()
                    caches[1].clear()
        if step == "copy then triton":
            a = torch.empty(32 * 2**20, dtype=torch.bfloat16, device="cuda")
            b = torch.empty_like(a)
            emit(out, kind="copy", median_us=round(time_call(lambda: b.copy_(a), "cuda", AUTOTUNE_TIMING).summary()["median_ms"] * 1e3, 3))
        LOG.clear()
        impl = "triton" if "triton" in step else step
        row = worker.measure(Case("rmsnorm", impl, "fwd", point, "bf16"))
        emit(out, kind="row", step=step, status=row["status"], reason=row.get("reason"),
             traceback=row.get("traceback"), median_us=round(row.get("median_ms", float("nan")) * 1e3, 3),
             kernel_configs=row.get("kernel_configs"), autotune_ms=row.get("autotune_ms"), bench_calls=list(LOG))


if __name__ == "__main__":
    main(sys.argv[1])
