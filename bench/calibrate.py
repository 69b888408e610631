"""`bench calibrate`: measure this machine's ceilings with the suite's own timer.

Memory: a large device-to-device copy, counting bytes read plus bytes written. Compute: a large matrix
product per dtype (random data: zeros run faster). Launch: a tiny kernel as the suite times it (GPU), host time
of one tiny eager op (CPU). On CPU the same with a memcpy and smaller GEMMs. With several ranks: the interconnect's
bus bandwidth (large all-reduces) and latency (a one-element all-reduce).
"""
from __future__ import annotations

import dataclasses
import os
import socket
import time

import torch

from bench.dtypes import precision, torch_dtype
from bench.timing import TimingConfig, time_call, time_fixed, wall_clock

CAL_TIMING = TimingConfig(warmup_min_ms=100, warmup_max_ms=3000, min_samples=10, min_time_ms=200, max_time_s=5,
                          rel_ci_target=0.01, cuda_graph="never")


# A ceiling is what the machine attains, not what it typically does: rates come from the fast end of the
# samples (the 20th-percentile time). NOTE: on an H200 (2026-11-29) cuBLAS bf16 4096^3 ran 728 TFLOP/s by
# the median in `bench calibrate` and 768 in a suite run minutes later, so median-based ceilings put
# measured points above 100% of their roofline.
CEILING_QUANTILE = "p20_ms"
LATENCY_BYTES = 4  # one fp32 element: the all-reduce whose time is all latency


def _copy_timing(device: str, nbytes: int, cfg: TimingConfig) -> dict:
    """The timing summary of copying `nbytes` into as many."""
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return time_call(lambda: dst.copy_(src), device, cfg).summary()


def _copy_bw(device: str, nbytes: int, cfg: TimingConfig) -> float:
    return 2 * nbytes / (_copy_timing(device, nbytes, cfg)[CEILING_QUANTILE] * 1e-3)


PROBE_MIB = 32


def copy_probe(device: str, cfg: TimingConfig, mib: int = PROBE_MIB) -> dict:
    """A copy of `mib` MiB into as many, timed as `bench run` times its cases (the same config, L2 flushed):
    the floor a memory-bound case of that size stands on, on this machine, now. On an H200 (session 29) 32 MiB
    read 18.4-19.0 us on two leases and 20.0-20.6 on two others of the same model, driver and software, and the
    norm and softmax forwards of those bytes moved with it, so a run records it (`env.copy_probe`) and `bench
    compare` names a change of it beside a memory-bound row's verdict."""
    median_ms = _copy_timing(device, mib * 2**20, cfg)["median_ms"]
    return {"mib": mib, "us": round(median_ms * 1e3, 3), "gbps": round(2 * mib * 2**20 / (median_ms * 1e-3) / 1e9, 1)}


def _matmul_rate(device: str, dtype: str, n: int, cfg: TimingConfig, layout: str = "nn") -> float:
    """FLOP/s of an n^3 product; layout "nt" / "tn" multiplies by a transposed view (the backward's operands),
    which cuBLAS runs with other kernels. Timed without the L2 flush: a compute ceiling is the rate attained with
    operands warm, as the second and third products of a forward + backward run (NOTE: on an H200 with the
    flush, 2 of 50 matmul suite rows still read 100.3% and 102.2%; both were fwd_bwd or tf32 4096^3)."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=gen, device=device).to(torch_dtype(dtype))
    b = torch.randn(n, n, generator=gen, device=device).to(torch_dtype(dtype))
    a, b = (a.t() if layout[0] == "t" else a), (b.t() if layout[1] == "t" else b)
    cfg = dataclasses.replace(cfg, flush_l2=False)
    with precision(dtype):
        t = time_call(lambda: torch.mm(a, b), device, cfg)
    return 2 * n**3 / (t.summary()[CEILING_QUANTILE] * 1e-3)


# NOTE: on an H200 (2026-11-29) cuBLAS bf16 ran 685 TFLOP/s at 8192^3 but 760 at 4096^3 and 777 at
# 8192x11008x4096: the largest products draw the most power and clock down. The ceiling is the best rate over
# a few sizes and the three operand layouts a forward and backward use, so that no measured point sits above its
# own roofline (with NN alone, NT/TN backward products ran 2-3% above the bf16 and tf32 ceilings).
GPU_SIZES = (4096, 6144, 8192)
LAYOUTS = ("nn", "nt", "tn")


def _best_rate(device: str, dtype: str, sizes, cfg: TimingConfig, log, layouts=LAYOUTS) -> float:
    rates = {n: max(_matmul_rate(device, dtype, n, cfg, lay) for lay in layouts) for n in sizes}
    best = max(rates, key=rates.get)
    log(f"matmul {dtype:>4} (best of {'/'.join(layouts).upper()}): "
        + ", ".join(f"{n}^3 {r / 1e12:,.1f}" for n, r in rates.items()) + f" TFLOP/s -> {rates[best] / 1e12:,.1f}")
    return rates[best]


def _launch_s(device: str) -> float:
    """The least one call costs where it is measured. On a GPU the suite times device work, events around each
    call with the stream held (bench.timing), so the floor is a tiny kernel timed that way. A tiny kernel inside a
    CUDA graph took 0.91 us on an H200 (the floor while the suite timed calls under 15 us by graphs, until session
    46), and events read 1.8-2.7 us more than a graph for the same call (explore126). NOTE: measuring the
    host's eager launch instead (10.5 us on an H200, 2026-11-29) put 1024^3 matmuls at 122% of roofline."""
    if device == "cuda":
        return _timed_kernel_s()
    x = torch.ones(1, device=device)
    for _ in range(100):
        x.add_(1)
    reps = 2000
    t0 = wall_clock()
    for _ in range(reps):
        x.add_(1)
    return (wall_clock() - t0) / reps


def _timed_kernel_s() -> float:
    """A one-element add, timed as `bench run` times a case (its samples' fast end, as for every ceiling)."""
    x = torch.ones(1, device="cuda")
    return time_call(lambda: x.add_(1), "cuda", TimingConfig()).summary()[CEILING_QUANTILE] * 1e-3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _allreduce_rank(rank: int, world: int, device: str, sizes: list[int], iters: int, port: int, queue) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank) if device == "cuda" else None)
    try:
        runs = []
        for nbytes in sizes:
            x = torch.randn(max(nbytes // 4, 1), device=device)  # [elements] fp32
            runs.append(time_fixed(lambda: dist.all_reduce(x), device, iters, warmup=5, sync=dist.barrier))
        queue.put((rank, runs))
    finally:
        dist.destroy_process_group()


def allreduce_runs(device: str, world: int, sizes: list[int], iters: int = 20) -> list[dict]:
    """An all-reduce of each of `sizes` (bytes, fp32) over `world` ranks, with its bus bandwidth as nccl-tests
    defines it: algbw = bytes / time, busbw = algbw * 2(n-1)/n. One process per rank (NCCL on GPUs, gloo on the
    CPU), one process group for all sizes; time is the slowest rank's fast end (20th percentile, as every
    ceiling)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_allreduce_rank, args=(r, world, device, sizes, iters, port, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    deadline = wall_clock() + 300
    while len(results) < world and wall_clock() < deadline:
        if not queue.empty():
            rank, runs = queue.get()
            results[rank] = runs
        elif not all(p.is_alive() for p in procs) and queue.empty():
            break
        else:
            time.sleep(0.01)  # a poll that spun would take a core from the ranks it waits on (2 of them on CI's 2)
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.kill()
    if len(results) < world:
        raise RuntimeError(f"all-reduce calibration failed: {len(results)} of {world} ranks reported")
    out = []
    for i, nbytes in enumerate(sizes):
        ms = max(sorted(runs[i])[len(runs[i]) // 5] for runs in results.values())
        algbw = nbytes / (ms * 1e-3)
        out.append({"world_size": world, "bytes": nbytes, "ms": ms, "algbw": algbw,
                    "busbw": algbw * 2 * (world - 1) / world})
    return out


def measure(device: str, quick: bool = False, log=print, world_size: int = 1) -> dict:
    """Measured ceilings as a dict for `roofline.merge`. `quick` (CPU, auto-calibration) keeps it to seconds."""
    cfg = TimingConfig.quick() if quick else CAL_TIMING
    out: dict = {"tensor_flops": {}, "device": device}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        out["l2_bytes"] = getattr(props, "L2_cache_size", 0)
        out["mem_bw"] = _copy_bw(device, 2 * 2**30, cfg)
        log(f"copy bandwidth (read + write): {out['mem_bw'] / 1e9:,.0f} GB/s")
        for dtype in ("bf16", "fp16", "tf32", "fp32", "fp64"):
            sizes, layouts = (GPU_SIZES[:1], LAYOUTS[:1]) if quick else (GPU_SIZES, LAYOUTS)
            out["tensor_flops"][dtype] = _best_rate(device, dtype, sizes, cfg, log, layouts)
        out["vector_flops"] = out["tensor_flops"]["fp32"]
    else:
        out["mem_bw"] = _copy_bw(device, (64 if quick else 256) * 2**20, cfg)
        log(f"memcpy bandwidth (read + write): {out['mem_bw'] / 1e9:,.1f} GB/s")
        sizes = {"fp32": 1024 if quick else 2048, "fp64": 1024 if quick else 2048, "bf16": 512 if quick else 1024}
        for dtype, n in sizes.items():
            out["tensor_flops"][dtype] = _matmul_rate(device, dtype, n, cfg)
            log(f"matmul {dtype:>4} {n}^3: {out['tensor_flops'][dtype] / 1e9:,.1f} GFLOP/s")
        out["tensor_flops"]["tf32"] = out["tensor_flops"]["fp32"]
        out["tensor_flops"]["fp16"] = out["tensor_flops"]["bf16"]
        out["vector_flops"] = out["tensor_flops"]["fp32"]
    out["launch_s"] = _launch_s(device)
    log(f"launch floor ({'one tiny kernel timed as a case' if device == 'cuda' else 'one tiny eager op'}): "
        f"{out['launch_s'] * 1e6:.2f} us")
    if world_size > 1:
        # NOTE: on 2 x H200 (2026-11-30) a 256 MiB all-reduce gave 289 GB/s while 1 GiB messages reached 325
        # (all_reduce) and 354 (broadcast): the ceiling is the best over the large sizes. A one-element all-reduce
        # gives the latency every collective pays whatever its size (1 MB all-reduces read 111 us on that machine
        # against 3.6 predicted from bandwidth alone).
        sizes = [LATENCY_BYTES] + [mib * 2**20 for mib in ((16,) if quick else (256, 1024))]
        tiny, *runs = allreduce_runs(device, world_size, sizes)
        log(f"all-reduce of one element over {world_size} ranks: {tiny['ms'] * 1e3:,.1f} us")
        for ar in runs:
            log(f"all-reduce {ar['bytes'] / 2**20:.0f} MiB over {world_size} ranks: {ar['ms']:.3f} ms, "
                f"bus bandwidth {ar['busbw'] / 1e9:,.1f} GB/s")
        ar = max(runs, key=lambda r: r["busbw"])
        out["interconnect_bw"] = ar["busbw"]
        out["comm_latency_s"] = tiny["ms"] * 1e-3
        out["allreduce"] = ar
    return out


def spec_for(device: str, log=lambda s: None):
    """Ceilings for this machine: cached calibration, else datasheet, else a quick calibration (stored)."""
    from bench import roofline
    from bench.results import device_name, environment

    env = environment(device)
    name = device_name(env, device)
    spec = roofline.resolve(name, env.get("driver"))
    if spec is None:
        spec = roofline.store_quick_calibration(measure(device, quick=True, log=log), name, env.get("driver"), log)
    return spec
