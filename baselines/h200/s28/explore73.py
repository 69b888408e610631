"""Session 28: the bench's autotuner read the first config it timed at 65536 x 16384, 16 warps, 12-13% slow
(rmsnorm 1,154-1,156 us, layernorm 1,152-1,155, in the norms suite runs at 1d043c2 and 8e5871a) where a process
that ran that point alone read 1,018-1,031 (explore71-72, and bench runs of the point alone); layernorm then
timed 1,120 us with 32 warps instead of 1,016. Here the suite's fwd cases at 65536 rows (rmsnorm then layernorm,
dims 768, 4096, 16384, each implementation, in the suite's order), measured in this process as a bench worker
measures them, with every kernels/ autotuner's benchmark as it is (`asis`) or timing each config twice and
keeping the second (`twice`: the first as warmup).

Run from the repository root: python3 baselines/h200/s28/explore73.py asis|twice OUT.jsonl   (on a GPU)
"""
from __future__ import annotations

import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.execute import Case, Worker  # noqa: E402
from bench.timing import TimingConfig  # noqa: E402
from kernels._autotune import quick_bench  # noqa: E402


def twice(fn, quantiles=None, **_):
    quick_bench(fn, quantiles=quantiles)
    return quick_bench(fn, quantiles=quantiles)


def main(mode, path):
    if mode == "twice":
        from triton.runtime.autotuner import Autotuner
        for name in ("rmsnorm", "layernorm", "softmax"):
            mod = importlib.import_module(f"kernels.{name}")
            for v in vars(mod).values():
                if isinstance(v, Autotuner):
                    v._do_bench = twice
    worker = Worker("cuda", TimingConfig())
    with open(path, "w") as out:
        for comp in ("rmsnorm", "layernorm"):
            for dim in (768, 4096, 16384):
                for impl in ("eager", "builtin", "compile", "triton"):
                    row = worker.measure(Case(comp, impl, "fwd", {"tokens": 65536, "dim": dim}, "bf16"))
                    keep = {k: row.get(k) for k in ("status", "reason", "median_ms", "kernel_configs", "autotune_ms")}
                    rec = dict(mode=mode, case=f"{comp} {impl} 65536x{dim}", **keep)
                    print(json.dumps(rec), flush=True)
                    out.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
