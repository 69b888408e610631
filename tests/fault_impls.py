"""A component whose implementations fail in every way a real one can; loaded via BENCH_PLUGINS=fault_impls."""
import os
import signal
import time

import torch

from bench.registry import Cost, component


def make_inputs(point, dtype, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    return {"x": torch.randn(point["n"], generator=gen, device=device, dtype=torch.float32).to(dtype)}


faults = component(
    "faults",
    description="deliberately faulty implementations for the robustness tests",
    axes={"n": int},
    make_inputs=make_inputs,
    cost=lambda point, dtype, mode: Cost(point["n"], 8 * point["n"]),
    reference=lambda x: x * 2,
    tolerance={"fp32": 1e-6, "bf16": 1e-2},
    modes=("fwd",),
    baseline="ok",
)


@faults.impl("ok")
def ok(x):
    return x * 2


@faults.impl("slow")
def slow(x):
    time.sleep(0.02)
    return x * 2


@faults.impl("oom")
def oom(x):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB (simulated)")


@faults.impl("raises")
def raises(x):
    raise ValueError("this implementation is broken on purpose")


@faults.impl("exits")
def exits(x):
    os._exit(1)


@faults.impl("segfaults")
def segfaults(x):
    os.kill(os.getpid(), signal.SIGSEGV)


@faults.impl("hangs")
def hangs(x):
    time.sleep(3600)


@faults.impl("pid")
def pid(x):
    """Returns the right answer; the test reads the worker pid from the row."""
    return x * 2
