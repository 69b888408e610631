"""`bench trace`: look inside chosen points.

Default: warmup calls, then a few timed calls under torch.profiler; writes a Chrome/Perfetto trace per case
and returns a per-kernel table. `--nsys` re-runs the same command under `nsys profile -t cuda,nvtx`; `--ncu`
re-runs it under Nsight Compute filtered to the timed call's NVTX range and sets the DRAM bytes and FLOPs it
counted beside the cost model's. `--memory` dumps a CUDA memory snapshot for PyTorch's memory viewer.
"""
from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from bench import distributed, profiling, registry
from bench.dtypes import precision
from bench.execute import Case, prepare_call
from bench.results import point_label


@dataclass
class Prepared:
    case: Case
    call: object
    device: str


def prepare(case: Case, device: str) -> Prepared:
    return Prepared(case, prepare_call(case, device), device)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_calls(p: Prepared, warmup: int, calls: int) -> None:
    """Warmup and timed calls, each in its named range, as `bench run` makes them."""
    with precision(p.case.dtype):
        for _ in range(warmup):
            with profiling.call_range(p.case, "warmup"):
                p.call()
        _sync(p.device)
        for _ in range(calls):
            with profiling.call_range(p.case, "timed"):
                p.call()
        _sync(p.device)


def profile(p: Prepared, out_dir: Path, warmup: int = 3, calls: int = 5, tag: str = "") -> tuple[Path, list[dict]]:
    """torch.profiler over warmup + timed calls; returns the trace path (`tag` ends its name) and the per-kernel
    table."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if p.device == "cuda" else [])
    run_calls(p, warmup=1, calls=0)  # compile and autotune before the profiler starts
    with tprofile(activities=activities, record_shapes=False) as prof:
        run_calls(p, warmup=warmup, calls=calls)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"trace-{_slug(profiling.range_name(p.case))}{tag}.json"
    prof.export_chrome_trace(str(path))
    return path, kernel_table(prof, p.device, calls + warmup)


def kernel_table(prof, device: str, calls: int) -> list[dict]:
    """GPU kernels (CUDA) or top-level aten ops (CPU) by total self time. The named ranges' projections on the GPU
    (the call's, a step's `forward` / `backward`) are no kernels: counted in, they took a quarter of a norm's
    table and three quarters of a training step's (H200 and H100, sessions 57 and 58)."""
    rows = []
    for evt in prof.key_averages():
        if device == "cuda":
            t = getattr(evt, "self_device_time_total", None) or getattr(evt, "self_cuda_time_total", 0)
            is_kernel = (getattr(evt, "device_type", None) == torch.autograd.DeviceType.CUDA
                         and not getattr(evt, "is_user_annotation", False))
            if not is_kernel or not t:
                continue
        else:
            t = evt.self_cpu_time_total
            if not evt.key.startswith("aten::") or not t:
                continue
        rows.append({"kernel": evt.key, "calls": evt.count, "total_us": t, "mean_us": t / max(evt.count, 1)})
    total = sum(r["total_us"] for r in rows) or 1
    for r in rows:
        r["share"] = r["total_us"] / total
    return sorted(rows, key=lambda r: -r["total_us"])


def memory_snapshot(p: Prepared, out_dir: Path, calls: int = 2, tag: str = "") -> Path:
    if p.device != "cuda":
        raise ValueError("--memory records CUDA allocations; it needs --device cuda")
    run_calls(p, warmup=1, calls=0)
    torch.cuda.memory._record_memory_history(max_entries=200_000)
    try:
        run_calls(p, warmup=0, calls=calls)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"memory-{_slug(profiling.range_name(p.case))}{tag}.pickle"
        torch.cuda.memory._dump_snapshot(str(path))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return path


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,-]+", "_", name)[:150]


# ---- external profilers ---------------------------------------------------------------------------------------

def plain_command(case: Case, device: str, calls: int, suites_file: str | None) -> list[str]:
    """The command that just runs the case's warmup and timed calls in their NVTX ranges, no profiler."""
    if registry.get(case.component).ranked:
        return ranked_command(case, device, calls) + ["--plain"]
    cmd = [sys.executable, "-m", "bench.cli", "trace", "--component", case.component, "--impl", case.impl,
           "--mode", case.mode, "--dtype", case.dtype, "--point", point_label(case.point), "--device", device,
           "--calls", str(calls), "--plain"]
    return cmd + (["--suites", suites_file] if suites_file else [])


def world_size(case: Case) -> int:
    comp = registry.get(case.component)
    return comp.world_size(comp.impls[case.impl], case.point)


def ranked_command(case: Case, device: str, calls: int) -> list[str]:
    """torchrun with a process a rank, each making the calls of `bench trace` (add --plain, --trace DIR or
    --memory DIR)."""
    return distributed.command(case, world_size(case), device) + ["--calls", str(calls)]


class RankedError(RuntimeError):
    """A rank of a traced multi-rank case failed (the message holds what it said)."""


def run_ranked(case: Case, device: str, calls: int, out_dir: Path, what: str) -> list[dict]:
    """`what` ("trace" or "memory") of a multi-rank case into out_dir, every rank's; their rows in rank order."""
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        out = os.path.join(tmp, "row.json")
        cmd = ranked_command(case, device, calls) + [f"--{what}", str(out_dir), "--out", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        rows = distributed.written_rows(out)
    failed = [r for r in rows if r.get("status") != "ok"]
    # every rank's row written is success, whatever torchrun's code: gloo ranks abort at teardown now and then
    # on a loaded CPU (bench.runner.ranked_result)
    if failed or len(rows) < world_size(case):
        why = failed[0]["reason"] if failed else f"torchrun exited with code {proc.returncode}"
        raise RankedError(f"{case.label}: {why}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return rows


def nsys_command(case: Case, device: str, out_dir: Path, calls: int) -> list[str]:
    out = out_dir / f"nsys-{_slug(profiling.range_name(case))}"
    return ["nsys", "profile", "-t", "cuda,nvtx", "--force-overwrite", "true", "-o", str(out)] + \
        plain_command(case, device, calls, None)


# Counters ncu reads: DRAM bytes, SIMT FLOPs by precision (FMA = 2), and matrix-unit work where the chip names it.
NCU_BYTES = ["dram__bytes_read.sum", "dram__bytes_write.sum"]
NCU_SIMT = {
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1, "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2, "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum": 1, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 1, "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 2,
}
# Matrix-unit operation counts per data path (names vary by chip; if the chip lacks them ncu is re-run without).
# Hopper (ncu --query-metrics --chip gh100, 2026-11-29): wgmma is HGMMA, mma.sync is HMMA.
NCU_TENSOR = ["sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum",
              "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_op_hgmma_src_fp16.sum"]


def ncu_command(case: Case, device: str, calls: int, tensor: bool = True) -> list[str]:
    metrics = NCU_BYTES + list(NCU_SIMT) + (NCU_TENSOR if tensor else [])
    ranks = ["--target-processes", "all"] if registry.get(case.component).ranked else []  # torchrun's children
    return ["ncu", *ranks, "--nvtx", "--nvtx-include", profiling.nvtx_filter(profiling.range_name(case)),
            "--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "--page", "raw"] + \
        plain_command(case, device, calls, None)


def parse_ncu_csv(text: str) -> list[dict]:
    """Rows of `ncu --csv --page raw`: one per kernel, metric columns by name (units row dropped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    header, rows = reader[0], reader[1:]
    if rows and rows[0] and rows[0][0] == "":  # the units row
        rows = rows[1:]
    out = []
    for r in rows:
        d = dict(zip(header, r))
        out.append(d)
    return out


def _float(s: str | None) -> float:
    try:
        return float(str(s).replace(",", ""))
    except (TypeError, ValueError):
        return 0.0


def ncu_summary(kernels: list[dict]) -> dict:
    total_bytes = sum(_float(k.get(m)) for k in kernels for m in NCU_BYTES)
    simt = sum(_float(k.get(m)) * w for k in kernels for m, w in NCU_SIMT.items())
    tensor = sum(_float(k.get(m)) for k in kernels for m in NCU_TENSOR)
    names = [k.get("Kernel Name", k.get("Function Name", "?")) for k in kernels]
    return {"kernels": names, "dram_bytes": total_bytes, "simt_flops": simt, "tensor_ops": tensor,
            "tensor_measured": any(m in k for k in kernels for m in NCU_TENSOR)}


class NcuError(RuntimeError):
    """ncu ran but reported no kernel of the case (its output says why)."""


def run_ncu(case: Case, device: str) -> tuple[dict, str]:
    """Run ncu on one timed call of `case`; falls back to no matrix-unit counters if the chip lacks them."""
    last = ""
    for tensor in (True, False):
        cmd = ncu_command(case, device, calls=1, tensor=tensor)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        last = proc.stdout + proc.stderr
        kernels = parse_ncu_csv(proc.stdout)
        if proc.returncode == 0 and kernels:
            return ncu_summary(kernels), shlex.join(cmd)
        if "metric" not in last.lower():
            break
    raise NcuError(f"ncu captured no kernel for {profiling.range_name(case)}:\n{last[-3000:]}")


def have(tool: str) -> bool:
    return shutil.which(tool) is not None
