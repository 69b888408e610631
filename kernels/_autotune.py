"""What every autotuned kernel shares: whether Triton runs through its CPU interpreter, and a short benchmark
for config selection."""
from __future__ import annotations

import os

import triton

# Under the interpreter (tests on CPU) kernels get one small config and no tuning; the interpreter also computes
# tl.dot on bf16 operands wrongly (rel err ~1e10), so kernels upcast their operands to fp32 there (bf16 products
# are exact in fp32, so the numbers match what the GPU computes).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def quick_bench(fn, quantiles=None, **_):
    """Autotuner benchmark: 5 ms warmup, 20 ms of repeats (Triton's default 25 + 100 ms per config multiplies
    across the dozens of (config, shape, dtype) combinations a suite meets)."""
    return triton.testing.do_bench(fn, warmup=5, rep=20, quantiles=quantiles)
