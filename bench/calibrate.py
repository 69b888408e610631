"""`bench calibrate`: measure this machine's ceilings with the suite's own timer.

Memory: a large device-to-device copy, counting bytes read plus bytes written. Compute: a large matrix
product per dtype (random data: zeros run faster). Launch: host time of one tiny eager op. On CPU the same with
a memcpy and smaller GEMMs.
"""
from __future__ import annotations

import torch

from bench.dtypes import precision, torch_dtype
from bench.timing import TimingConfig, time_call, wall_clock

CAL_TIMING = TimingConfig(warmup_min_ms=100, warmup_max_ms=3000, min_samples=10, min_time_ms=200, max_time_s=5,
                          rel_ci_target=0.01, cuda_graph="never")


def _copy_bw(device: str, nbytes: int, cfg: TimingConfig) -> float:
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = time_call(lambda: dst.copy_(src), device, cfg)
    return 2 * nbytes / (t.summary()["median_ms"] * 1e-3)


def _matmul_rate(device: str, dtype: str, n: int, cfg: TimingConfig) -> float:
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=gen, device=device).to(torch_dtype(dtype))
    b = torch.randn(n, n, generator=gen, device=device).to(torch_dtype(dtype))
    with precision(dtype):
        t = time_call(lambda: torch.mm(a, b), device, cfg)
    return 2 * n**3 / (t.summary()["median_ms"] * 1e-3)


# NOTE: on an H200 (2026-11-29) cuBLAS bf16 ran 685 TFLOP/s at 8192^3 but 760 at 4096^3 and 777 at
# 8192x11008x4096: the largest products draw the most power and clock down. The ceiling is the best rate over
# a few sizes, so that no measured point sits above its own roofline.
GPU_SIZES = (4096, 6144, 8192)


def _best_rate(device: str, dtype: str, sizes, cfg: TimingConfig, log) -> float:
    rates = {n: _matmul_rate(device, dtype, n, cfg) for n in sizes}
    best = max(rates, key=rates.get)
    log(f"matmul {dtype:>4}: " + ", ".join(f"{n}^3 {r / 1e12:,.1f}" for n, r in rates.items())
        + f" TFLOP/s -> {rates[best] / 1e12:,.1f}")
    return rates[best]


def _launch_s(device: str) -> float:
    x = torch.ones(1, device=device)
    for _ in range(100):
        x.add_(1)
    if device == "cuda":
        torch.cuda.synchronize()
    reps = 2000
    t0 = wall_clock()
    for _ in range(reps):
        x.add_(1)
    if device == "cuda":
        torch.cuda.synchronize()
    return (wall_clock() - t0) / reps


def measure(device: str, quick: bool = False, log=print) -> dict:
    """Measured ceilings as a dict for `roofline.merge`. `quick` (CPU, auto-calibration) keeps it to seconds."""
    cfg = TimingConfig.quick() if quick else CAL_TIMING
    out: dict = {"tensor_flops": {}, "device": device}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        out["l2_bytes"] = getattr(props, "L2_cache_size", 0)
        out["mem_bw"] = _copy_bw(device, 2 * 2**30, cfg)
        log(f"copy bandwidth (read + write): {out['mem_bw'] / 1e9:,.0f} GB/s")
        for dtype in ("bf16", "fp16", "tf32", "fp32", "fp64"):
            sizes = GPU_SIZES[:1] if quick else GPU_SIZES
            out["tensor_flops"][dtype] = _best_rate(device, dtype, sizes, cfg, log)
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
    log(f"launch overhead (one tiny eager op): {out['launch_s'] * 1e6:.1f} us")
    return out


def spec_for(device: str, log=lambda s: None):
    """Ceilings for this machine: cached calibration, else datasheet, else a quick calibration (stored)."""
    from bench import roofline
    from bench.results import device_name, environment

    env = environment(device)
    name = device_name(env, device)
    spec = roofline.resolve(name, env.get("driver"))
    if spec is None:
        spec = roofline.merge(measure(device, quick=True, log=log), None, name)
        spec = roofline.DeviceSpec(**{**spec.to_json(), "source": "calibrated (quick, automatic)"})
        roofline.store(spec, name, env.get("driver"))
    return spec
