"""Cross-check the suite's timer against triton.testing.do_bench on the same calls, in the same process."""
from __future__ import annotations

from bench.dtypes import precision
from bench.execute import Case, prepare_call
from bench.timing import TimingConfig, time_call


def crosscheck(case: Case, device: str = "cuda") -> dict:
    import triton.testing

    call = prepare_call(case, device)
    with precision(case.dtype):
        ours = time_call(call, device, TimingConfig()).summary()["median_ms"]
        # do_bench flushes L2 between calls too (it zeroes a 256 MB buffer) and returns the median asked for.
        theirs = triton.testing.do_bench(call, warmup=100, rep=500, return_mode="median")
    return {"case": case.label, "bench_ms": ours, "do_bench_ms": theirs, "ratio": ours / theirs}
