"""What every kernel shares: whether Triton runs through its CPU interpreter, the dtypes its launchers take, and a
short benchmark for config selection."""
from __future__ import annotations

import os

import torch
import triton

# Under the interpreter (tests on CPU) kernels get one small config and no tuning; the interpreter also computes
# tl.dot on bf16 operands wrongly (rel err ~1e10), so kernels upcast their operands to fp32 there (bf16 products
# are exact in fp32, so the numbers match what the GPU computes).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

# The kernels load and store these and compute in fp32: a float64 input would come back at fp32's precision and an
# integer one as garbage, so the launchers refuse both.
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_dtype(t: torch.Tensor) -> None:
    if t.dtype not in DTYPES:
        raise ValueError(f"dtype {t.dtype} is not supported (fp32, bf16, fp16)")


_benchmark = None  # what the autotuners time candidates with, when the harness running the kernels installs one


def set_benchmark(fn) -> None:
    """Have every autotuner time its candidates with fn(kernel_call, quantiles=...) -> ms (or a list of quantiles in
    ms), as triton.testing.do_bench is called: `bench` installs its timer (bench.timing.autotune_bench), whose
    events time the device alone; do_bench's also time the host issuing the call."""
    global _benchmark
    _benchmark = fn


def quick_bench(fn, quantiles=None, **_):
    """Autotuner benchmark: the installed one (set_benchmark), else do_bench briefly: 5 ms warmup, 20 ms of repeats
    (Triton's default 25 + 100 ms per config multiplies across the dozens of (config, shape, dtype) combinations a
    suite meets)."""
    if _benchmark is not None:
        return _benchmark(fn, quantiles=quantiles)
    return triton.testing.do_bench(fn, warmup=5, rep=20, quantiles=quantiles)
