"""The per-rank entry point of multi-rank cases: `torchrun --nproc-per-node N -m bench.distributed ...`.

Each rank checks its output against the float64 reference and times the call (`time_ranked`); rank 0 writes the
row (worst error, slowest rank's time, fullest rank's peak memory) to --out. NCCL on GPUs, gloo on the CPU. With
--trace, --memory or --plain the ranks make `bench trace`'s calls instead (bench/trace.py builds that command).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

from bench import profiling, registry
from bench.check import as_tuple, compare, worst
from bench.dtypes import precision, torch_dtype
from bench.execute import Case, first_line
from bench.timing import TimingConfig, time_ranked

CHECK_ELEMENTS = 1 << 20  # outputs longer than this are checked on their first elements (the row says so)


def command(case: Case, world: int, device: str) -> list[str]:
    """torchrun with a process a rank, each running this module on `case` (the caller adds what they do)."""
    spec = {"component": case.component, "impl": case.impl, "mode": case.mode, "point": case.point, "dtype": case.dtype}
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node",
            str(world), "--max-restarts", "0", "-m", "bench.distributed", "--case", json.dumps(spec), "--device", device]


def written_rows(out: str) -> list[dict]:
    """The rows the ranks wrote for --out `out` (each its own file, see _write), in rank order."""
    rows = []
    for path in glob.glob(out + ".rank*.json"):
        with open(path) as f:
            rows.append(json.load(f))
    return sorted(rows, key=lambda r: r["rank"])


def build(case: Case, device: str, seed: int):
    """This rank's callable of `case` and its inputs (call it under the case's dtype precision)."""
    comp = registry.get(case.component)
    fn = comp.impls[case.impl].build(case.point, case.dtype, device)
    return fn, comp.make_inputs(case.point, torch_dtype(case.dtype), device, seed, dist.get_rank())


def look_inside(case: Case, device: str, calls: int, trace_dir: str | None, memory_dir: str | None) -> dict:
    """`bench trace` of a multi-rank case, on every rank alike: warmup and `calls` timed calls in their named ranges
    (for nsys and ncu), under torch.profiler when `trace_dir` is given (a trace per rank, and this rank's kernel
    table), or with a CUDA memory snapshot per rank in `memory_dir`."""
    from pathlib import Path

    from bench import trace

    with precision(case.dtype):
        fn, inputs = build(case, device, seed=0)
    p = trace.Prepared(case, lambda: fn(**inputs), device)
    tag = f"-rank{dist.get_rank()}"
    if trace_dir:
        path, kernels = trace.profile(p, Path(trace_dir), warmup=2, calls=calls, tag=tag)
        return {"status": "ok", "path": str(path), "kernels": kernels}
    if memory_dir:
        return {"status": "ok", "path": str(trace.memory_snapshot(p, Path(memory_dir), calls, tag=tag))}
    trace.run_calls(p, warmup=2, calls=calls)
    return {"status": "ok"}


def measure_ranked(case: Case, device: str, cfg: TimingConfig, seed: int) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    comp = registry.get(case.component)
    dev = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    row: dict = {"status": "ok", "reason": "", "world_size": world}
    with precision(case.dtype):
        fn, inputs = build(case, device, seed)
        row.update(getattr(fn, "row_info", {}))
        fresh = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
        outputs = as_tuple(fn(**fresh))
        if hasattr(fn, "check_outputs"):  # a training step: what is checked is the state it leaves
            outputs = as_tuple(fn.check_outputs())
        if device == "cuda":
            torch.cuda.synchronize()
        results = []
        if getattr(fn, "ranks_agree_only", False):  # no float64 reference for this point (the row says why)
            results.append(ranks_agree(outputs, dev))
        for i, out in enumerate(outputs if not results else ()):
            flat = out.reshape(-1)
            n = min(flat.numel(), CHECK_ELEMENTS)
            ref = comp.reference(case.point, case.dtype, seed, rank, world, n)[i]
            results.append(compare(f"rank {rank} output {i}", flat[:n], ref, comp.tolerance[case.dtype]))
            if n < flat.numel():
                row["check_note"] = f"checked the first {n} of {flat.numel()} elements on every rank"
        res = worst(results)
        err = torch.tensor([res.rel_err if res.ok else float("inf"), 0.0 if res.ok else 1.0], dtype=torch.float64, device=dev)
        dist.all_reduce(err, op=dist.ReduceOp.MAX)
        row.update(rel_err=float(err[0]) if err[1] == 0 else None, tol=res.tol, max_abs_err=res.max_abs_err)
        if err[1] > 0:
            row.update(status="mismatch", reason=res.reason or "a rank's output disagrees with the reference")
        del fresh, outputs
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        timing = time_ranked(lambda: fn(**inputs), device, cfg, lambda phase: profiling.call_range(case, phase))
        comm = comm_profile(lambda: fn(**inputs), dev) if device == "cuda" and comp.comm_share else {}
    row.update(timing.summary())
    row["compile_s"] = max(0.0, timing.first_call_ms - row["median_ms"]) / 1e3
    if device == "cuda":
        peak = torch.tensor([torch.cuda.max_memory_allocated()], dtype=torch.float64, device=dev)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        row["peak_mem_bytes"] = int(peak.item())
    row.update(comm)
    return row


COMM_CALLS = 3  # calls profiled for the communication share


def comm_profile(call, dev: torch.device) -> dict:
    """Share of a call's GPU time spent in communication, from a CUPTI trace of COMM_CALLS calls after timing:
    comm_share = time some NCCL kernel runs / the span of the traced kernels; exposed_comm_share = time an NCCL
    kernel runs while no other kernel does (communication nothing overlaps). Both are the largest over ranks.
    NCCL kernels start when their stream reaches them and end when every rank has joined, so a rank's wait for a
    slower one counts as communication. On failure the row says why instead (the measurement is kept)."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    try:
        dist.barrier()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(COMM_CALLS):
                call()
            torch.cuda.synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            kernels = trace_kernels(json.load(open(f.name)))
        shares = comm_shares(kernels)
    except Exception as e:  # a profiler that will not start must not cost the row
        shares, failed = {"comm_share": 0.0, "exposed_comm_share": 0.0}, first_line(e)
    else:
        failed = ""
    both = torch.tensor([shares["comm_share"], shares["exposed_comm_share"], 1.0 if failed else 0.0],
                        dtype=torch.float64, device=dev)
    dist.all_reduce(both, op=dist.ReduceOp.MAX)
    if both[2] > 0:
        return {"comm_note": f"communication share not measured: {failed or 'another rank could not trace'}"}
    # per call, on this rank: NCCL busy time and the traced kernels' span (tracing slows the calls a little)
    return {"comm_share": float(both[0]), "exposed_comm_share": float(both[1]),
            "comm_ms": shares["comm_ms"] / COMM_CALLS, "comm_window_ms": shares["span_ms"] / COMM_CALLS}


def trace_kernels(trace: dict) -> list[tuple[str, float, float]]:
    """(name, start us, end us) of every GPU kernel in a chrome trace from torch.profiler."""
    return [(e["name"], float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in trace.get("traceEvents", [])
            if e.get("cat") == "kernel" and "dur" in e]


def comm_shares(kernels: list[tuple[str, float, float]]) -> dict:
    """comm_share and exposed_comm_share (see comm_profile) of kernels (name, start us, end us) over their span
    (first start to last end), comm_ms, the NCCL busy time, and span_ms. Overlapping kernels count once."""
    comm = union([(a, b) for name, a, b in kernels if "nccl" in name.lower()])
    other = union([(a, b) for name, a, b in kernels if "nccl" not in name.lower()])
    busy = length(comm)
    exposed = busy - length(intersect(comm, other))
    span = max((b for _, _, b in kernels), default=0.0) - min((a for _, a, _ in kernels), default=0.0)
    span = max(span, 1e-9)
    return {"comm_share": busy / span, "exposed_comm_share": exposed / span, "comm_ms": busy / 1e3,
            "span_ms": span / 1e3}


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def intersect(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The overlap of two sorted disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def ranks_agree(outputs: tuple, dev: torch.device):
    """The check when no float64 reference is run: every rank holds bitwise the same outputs (sum and sum of
    squares in float64 compared across ranks)."""
    from bench.check import CheckResult

    flat = torch.cat([o.reshape(-1).double() for o in outputs])
    stats = torch.stack([flat.sum(), flat.pow(2).sum()]).to(dev)
    lo, hi = stats.clone(), stats.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    spread = float((hi - lo).abs().max() / hi.abs().max().clamp_min(1e-300))
    ok = torch.isfinite(stats).all().item() and spread == 0.0
    return CheckResult(bool(ok), spread, spread, 0.0, "" if ok else f"ranks disagree (relative spread {spread:.2e})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, help="JSON: component, impl, mode, point, dtype")
    ap.add_argument("--device", choices=["cpu", "cuda"], required=True)
    ap.add_argument("--timing", default="{}", help="JSON of TimingConfig fields")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="where rank 0 writes the row (JSON); with --trace or --memory every "
                                                "rank writes its own")
    ap.add_argument("--trace", default=None, metavar="DIR", help="instead of measuring: torch.profiler over the "
                                                                 "calls, a trace per rank in DIR")
    ap.add_argument("--memory", default=None, metavar="DIR", help="instead of measuring: a CUDA memory snapshot "
                                                                  "per rank in DIR")
    ap.add_argument("--plain", action="store_true", help="instead of measuring: just the calls, in their NVTX "
                                                         "ranges (for nsys and ncu)")
    ap.add_argument("--calls", type=int, default=5, help="timed calls of --trace, --memory and --plain")
    ap.add_argument("--pids", default=None, help="a folder where each rank leaves its pid (for cleanup)")
    args = ap.parse_args(argv)
    if args.pids:
        with open(os.path.join(args.pids, f"rank-{os.environ.get('RANK', '0')}.pid"), "w") as f:
            f.write(str(os.getpid()))
    case = Case(**json.loads(args.case))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if args.device == "cuda":
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", timeout=timedelta(minutes=10),
                            device_id=torch.device("cuda", local) if args.device == "cuda" else None)
    registry.discover()
    inside = bool(args.trace or args.memory or args.plain)
    try:
        if inside:
            row = look_inside(case, args.device, args.calls, args.trace, args.memory)
        else:
            row = measure_ranked(case, args.device, TimingConfig(**json.loads(args.timing)), args.seed)
    except torch.OutOfMemoryError as e:
        row = {"status": "oom", "reason": f"rank {dist.get_rank()}: {first_line(e)}"}
        print(traceback.format_exc(), file=sys.stderr)
        if args.out:
            _write(args.out, row)  # every failing rank reports; the parent takes the earliest
        os._exit(REPORTED_OOM)  # the others are stuck in a collective: torchrun ends them
    except Exception as e:
        print(traceback.format_exc(), file=sys.stderr)
        if args.out:
            _write(args.out, {"status": "error", "reason": f"rank {dist.get_rank()}: {type(e).__name__}: {first_line(e)}"})
        os._exit(REPORTED_ERROR)
    if args.out and (inside or dist.get_rank() == 0):
        _write(args.out, row)
    dist.destroy_process_group()
    return 0


# Exit codes of a rank that wrote its own error row (any other non-zero code is a rank that died unreported).
REPORTED_OOM, REPORTED_ERROR = 3, 4


def _write(path: str, row: dict) -> None:
    """Each rank writes its own file (path.rank<r>.json), stamped, so the parent can tell which failed first."""
    import time

    row = {**row, "rank": int(os.environ.get("RANK", 0)), "at": time.time()}
    final = f"{path}.rank{row['rank']}.json"
    tmp = f"{final}.tmp"
    with open(tmp, "w") as f:
        json.dump(row, f, default=lambda o: None)
    os.replace(tmp, final)


if __name__ == "__main__":
    sys.exit(main())
