"""Cross-check the suite's timer against triton.testing.do_bench on the same calls, in the same process."""
from __future__ import annotations

import torch

from bench import registry
from bench.check import as_tuple
from bench.dtypes import precision, torch_dtype
from bench.execute import Case, make_timed_call, point_seed
from bench.timing import TimingConfig, time_call


def crosscheck(case: Case, device: str = "cuda") -> dict:
    comp = registry.get(case.component)
    impl = comp.impls[case.impl]
    seed = point_seed(case, 0)
    with precision(case.dtype):
        fn = impl.build(case.point, case.dtype, device)
        inputs = comp.make_inputs(case.point, torch_dtype(case.dtype), device, seed)
        with torch.no_grad():
            out_like = tuple(o.detach() for o in as_tuple(fn(**inputs)))
        call = make_timed_call(impl, fn, comp, case.mode, inputs, device, seed, out_like)
        ours = time_call(call, device, TimingConfig()).summary()["median_ms"]
        import triton.testing

        # do_bench flushes L2 between calls too (it zeroes a 256 MB buffer) and returns the median asked for.
        theirs = triton.testing.do_bench(call, warmup=100, rep=500, return_mode="median")
    return {"case": case.label, "bench_ms": ours, "do_bench_ms": theirs, "ratio": ours / theirs}
