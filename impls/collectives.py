"""collectives: all_reduce, all_gather, reduce_scatter and broadcast through torch.distributed.

`mb` is the buffer size as nccl-tests defines it (the full reduced / gathered tensor). Bus bandwidth follows
nccl-tests: busbw = size / time x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather and reduce_scatter, x 1
for broadcast; the cost model's comm_bytes are those bus bytes, so the prediction is comm_bytes / interconnect.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from bench.dtypes import itemsize, torch_dtype
from bench.registry import Cost, component

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}


def _elements(point, size: int) -> int:
    """Elements of the full buffer (`mb` MiB of `size`-byte elements), a multiple of the world size."""
    n = point["mb"] * 2**20 // size
    return n - n % point["world_size"]


def values(rank: int, idx: torch.Tensor, seed: int) -> torch.Tensor:
    """Rank `rank`'s input at positions `idx`: a hash of (seed, rank, index) in [-1, 1), never constant, and
    computable for any slice, so every rank can build its reference without the others' tensors."""
    h = (idx * 2654435761 + (rank + 1) * 40503 + seed * 97) % 2048
    return h.to(torch.float64) / 1024 - 1


def make_inputs(point, dtype, device, seed, rank):
    n = _elements(point, dtype.itemsize)
    ws = point["world_size"]
    own = n // ws if point["op"] == "all_gather" else n
    x = values(rank, torch.arange(own, dtype=torch.int64), seed).to(dtype).to(device)  # [own]
    out = None
    if point["op"] == "all_gather":
        out = torch.empty(n, dtype=dtype, device=device)  # [n]
    elif point["op"] == "reduce_scatter":
        out = torch.empty(n // ws, dtype=dtype, device=device)  # [n / ws]
    return {"x": x, "out": out, "op": point["op"]}


def reference(point, dtype, seed, rank, world, n):
    """The first n elements this rank holds after the op, in float64 (inputs rounded to dtype first)."""
    tdt = torch_dtype(dtype)
    total = _elements(point, itemsize(dtype))
    chunk = total // world
    v = lambda r, idx: values(r, idx, seed).to(tdt).to(torch.float64)
    j = torch.arange(n, dtype=torch.int64)
    op = point["op"]
    if op == "all_reduce":
        return (sum(v(r, j) for r in range(world)),)
    if op == "broadcast":
        return (v(0, j),)
    if op == "all_gather":
        return (torch.cat([v(int(r), j[(j // chunk) == r] % chunk) for r in range(world)]),)
    return (sum(v(r, rank * chunk + j) for r in range(world)),)  # reduce_scatter


def cost(point, dtype, mode):
    size = itemsize(dtype)
    nbytes = _elements(point, size) * size
    ws = point["world_size"]
    reduce = point["op"] in ("all_reduce", "reduce_scatter")
    return Cost(flops=nbytes / size * (ws - 1) / ws if reduce else 0.0, bytes=2 * nbytes,
                comm_bytes=nbytes * BUS_FACTOR[point["op"]](ws))


collectives = component(
    "collectives",
    description="torch.distributed collectives (nccl-tests' algorithm and bus bandwidth)",
    axes={"op": OPS, "mb": int, "world_size": int},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    tolerance={"fp32": 1e-6, "bf16": 1e-2, "fp16": 2e-3},
    modes=("fwd",),
    dtypes=("fp32", "bf16"),
    baseline="torch",
    ranked=True,
)


@collectives.impl("torch", description="torch.distributed on the process group's backend (NCCL / gloo)")
def torch_collective(x, out, op):
    if op == "all_reduce":
        dist.all_reduce(x)
        return x
    if op == "broadcast":
        dist.broadcast(x, src=0)
        return x
    if op == "all_gather":
        dist.all_gather_into_tensor(out, x)
        return out
    if dist.get_backend() == "gloo":  # gloo has no reduce_scatter: all-reduce a copy, keep this rank's chunk
        full = x.clone()
        dist.all_reduce(full)
        out.copy_(full.view(dist.get_world_size(), -1)[dist.get_rank()])
        return out
    dist.reduce_scatter_tensor(out, x)
    return out
