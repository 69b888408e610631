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
    """20 ms a call; where BENCH_TEST_GATE is set, a point with n > 3 first waits until the file it names exists:
    a run the test interrupts after its first three rows cannot finish before the signal however late the test
    gets to send it."""
    gate = os.environ.get("BENCH_TEST_GATE")
    while gate and x.numel() > 3 and not os.path.exists(gate):
        time.sleep(0.01)
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


# ---- a multi-rank component: rank 1 fails in each way ---------------------------------------------------------
import torch.distributed as dist


def ranked_inputs(point, dtype, device, seed, rank):
    return {"x": torch.full((point["n"],), float(rank + 1), dtype=dtype, device=device)}


def ranked_reference(point, dtype, seed, rank, world, n):
    return (torch.full((n,), float(sum(range(1, world + 1))), dtype=torch.float64),)


rank_faults = component(
    "rank_faults",
    description="multi-rank implementations where rank 1 fails, for the robustness tests",
    axes={"n": int, "world_size": int},
    make_inputs=ranked_inputs,
    cost=lambda point, dtype, mode: Cost(0, 8 * point["n"], comm_bytes=8 * point["n"]),
    reference=ranked_reference,
    tolerance={"fp32": 1e-6},
    modes=("fwd",),
    dtypes=("fp32",),
    baseline="ok",
    ranked=True,
)


@rank_faults.impl("ok")
def ranked_ok(x):
    dist.all_reduce(x.zero_().add_(dist.get_rank() + 1))
    return x


@rank_faults.impl("exits")
def ranked_exits(x):
    if dist.get_rank() == 1:
        os._exit(1)
    dist.all_reduce(x)
    return x


@rank_faults.impl("raises")
def ranked_raises(x):
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 is broken on purpose")
    dist.all_reduce(x)
    return x


@rank_faults.impl("hangs")
def ranked_hangs(x):
    if dist.get_rank() == 1:
        time.sleep(3600)
    dist.all_reduce(x)
    return x
