"""data_parallel on the CPU with 2 gloo ranks: every strategy trains the tiny tied LM (one frozen parameter) and
ends where single-process training on the global batch ends; the memory model by hand."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import registry
from impls import _model
from impls import data_parallel as dp

ROOT = Path(__file__).parent.parent


def run_workers(tmp_path, names, mixed=False) -> dict:
    """The workers' report. Rank 0 writes it (atomically) once every strategy has finished on both ranks; it
    stands even if a rank then dies at teardown. NOTE: gloo ranks abort at teardown now and then under load
    ("terminate called without an active exception", SIGABRT; clean-clone CI, 2026-11-30), which is not the
    strategies' failure. A run that dies before writing the report gets one more try."""
    out = tmp_path / "dp.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "tests" / "dp_worker.py"), str(out), ",".join(names), "mixed" if mixed else "fp32"]
    for _ in range(2):
        out.unlink(missing_ok=True)
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
        if out.exists():
            return json.loads(out.read_text())
    raise AssertionError(f"exit {proc.returncode}, no report: " + proc.stdout[-3000:] + proc.stderr[-3000:])


@pytest.mark.slow
def test_every_strategy_trains_like_one_process(tmp_path):
    # FSDP1 needs an accelerator (a skipped row on the CPU); bucketed with one bucket per parameter and one bucket
    on_cpu = [n for n in dp.STRATEGIES if n not in ("fsdp1", "bucketed")] + ["bucketed:0", "bucketed:1", "unsynced"]
    report = run_workers(tmp_path, on_cpu)
    assert set(report) == set(on_cpu)
    assert report.pop("unsynced")["rel_err"] > 1e-3  # training without gradient sync ends elsewhere
    for name, r in report.items():
        assert r["moved"] > 1e-3, f"{name}: parameters did not move"
        assert r["rel_err"] < 1e-5, f"{name}: {r['rel_err']:.2e} from single-process training"
        assert r["frozen_still_ones"], f"{name}: the frozen parameter changed"


@pytest.mark.slow
def test_mixed_precision_strategies_stay_close(tmp_path):
    report = run_workers(tmp_path, ["ddp", "bucketed:1", "zero1", "fsdp2"], mixed=True)
    for name, r in report.items():
        assert r["moved"] > 1e-3
        assert r["rel_err"] < registry.get("data_parallel").tolerance["bf16"], name


def test_memory_model_by_hand():
    point = {"config": "xl", "batch": 4, "seq": 512, "world_size": 2, "bucket_mb": 25}
    p = _model.CONFIGS["xl"].params()
    ddp = dp.predict_memory(point, "fp32", "ddp", 2)
    assert ddp["params"] == ddp["grads"] == ddp["buckets"] == ddp["optimizer_temp"] == 4 * p
    assert ddp["optimizer"] == 8 * p and "bf16_weights" not in ddp
    zero = dp.predict_memory(point, "fp32", "zero1", 2)
    assert zero["optimizer"] == 4 * p and zero["optimizer_temp"] == 2 * p and zero["params"] == 4 * p
    fsdp = dp.predict_memory(point, "bf16", "fsdp2", 2)
    assert fsdp["params"] == 2 * p and fsdp["grads"] == 2 * p and fsdp["optimizer"] == 4 * p
    assert 0 < fsdp["unsharded"] < p and "bf16_weights" not in fsdp  # a few blocks and the root, not the model
    d, f, v, layers, tokens = 1600, 6400, 10_000, 48, 4 * 512
    # per token and layer: 16 d fp32 (norm inputs, RoPE round trip) + 9 d and 4 f in the compute dtype; logits
    assert ddp["activations"] == tokens * (layers * (16 * d + 9 * 4 * d + 4 * 4 * f) + 4 * v + 8 * v)
    assert fsdp["activations"] == tokens * (layers * (16 * d + 9 * 2 * d + 4 * 2 * f) + 2 * v + 8 * v)
    # sharding four ways shrinks what is sharded, nothing else
    four = dp.predict_memory({**point, "world_size": 4}, "bf16", "fsdp2", 4)
    assert four["optimizer"] == fsdp["optimizer"] / 2 and four["activations"] == fsdp["activations"]


def test_peak_is_the_largest_phase():
    mem = {"params": 10, "optimizer": 20, "buckets": 10, "grads": 10, "optimizer_temp": 10, "activations": 5,
           "bf16_weights": 5, "flat_copies": 0}
    assert dp.peak_memory(mem) == 40 + 20  # the optimizer step: grads + temporaries
    assert dp.peak_memory({**mem, "activations": 50}) == 40 + 55  # forward
    assert dp.peak_memory({**mem, "flat_copies": 30}) == 40 + 40  # gradient sync


@pytest.mark.slow
def test_bench_run_data_parallel_rows(tmp_path):
    """Through `bench run` (torchrun, 2 gloo ranks): rows checked against the float64 reference, with the
    predicted memory."""
    from bench import results

    out = tmp_path / "dp.jsonl"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "run", "data-parallel-cpu", "--device", "cpu",
                           "--impl", "ddp", "--impl", "zero1", "--out", str(out), "--quick-timing",
                           "--no-report"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "BENCH_CACHE_DIR": str(tmp_path / "cache")})  # no calibrated interconnect
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["impl"]: r for r in results.read_rows(out)}
    for name in ("ddp", "zero1"):
        r = rows[name]
        assert r["status"] == "ok" and r["world_size"] == 2 and r["rel_err"] <= r["tol"], r["reason"]
        assert r["predicted_mem_bytes"] == int(dp.peak_memory(r["predicted_mem"])) > 0
        assert "predicted_comm_ms" not in r  # no interconnect bandwidth calibrated for the CPU here



def test_comm_share_from_a_trace_counts_overlap_once_and_exposed_time_apart():
    """A hand-made chrome trace: compute 0-10 us and 18-19 us, NCCL 5-15 and 14-20 (overlapping each other), and
    a CPU op that must be ignored; the kernels span 0-20 us. NCCL is busy 5-20 (15 us, 75%); compute covers 5-10
    and 18-19 of that (6 us), so 9 us (45%) is exposed."""
    from bench.distributed import comm_shares, trace_kernels

    trace = {"traceEvents": [
        {"cat": "kernel", "name": "ampere_bf16_gemm", "ts": 0, "dur": 10},
        {"cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 5, "dur": 10},
        {"cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 14, "dur": 6},
        {"cat": "kernel", "name": "vectorized_elementwise_kernel", "ts": 18, "dur": 1},
        {"cat": "cpu_op", "name": "nccl:all_reduce", "ts": 0, "dur": 25},
        {"ph": "M", "name": "process_name"},
    ]}
    kernels = trace_kernels(trace)
    assert len(kernels) == 4
    shares = comm_shares(kernels)
    assert shares["comm_share"] == pytest.approx(0.75)
    assert shares["exposed_comm_share"] == pytest.approx(0.45)
    assert shares["comm_ms"] == pytest.approx(0.015) and shares["span_ms"] == pytest.approx(0.020)
    assert comm_shares([k for k in kernels if "nccl" not in k[0]])["comm_share"] == 0.0


def test_step_carries_its_ranges_where_autograd_runs_its_backward(monkeypatch):
    """The step's backward runs inside profiling.backward_in_ranges (autograd's worker thread for the GPU gets the
    step's open NVTX ranges) and where training runs it: autograd's worker threads stay on."""
    from contextlib import contextmanager

    import torch

    point = {"config": "tiny-tied", "batch": 2, "seq": 16, "world_size": 1, "bucket_mb": 1}
    model = dp.build_model(point, "cpu")
    seen, entered = [], []
    dp.trainable(model)[0].register_hook(lambda g: seen.append(torch.autograd.is_multithreading_enabled()))

    @contextmanager
    def recording(outputs):
        entered.append([o.shape for o in outputs])
        yield

    monkeypatch.setattr(dp, "backward_in_ranges", recording)
    dp.Step(model, dp.adamw(dp.trainable(model)))(dp.make_inputs(point, torch.float32, "cpu", 0, 0)["tokens"])
    assert seen == [True]
    assert entered == [[torch.Size([])]]  # the loss


def test_a_point_of_one_rank_runs_on_one_gpu(monkeypatch):
    """The strategies list 2 GPUs among their needs (for `bench list`), but a point's world_size decides: one of
    world_size 1 ran nowhere on a machine of one GPU ("needs 2 GPUs, 1 visible", H100, session 58)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    comp = registry.get("data_parallel")
    point = {"config": "tiny-tied", "batch": 2, "seq": 16, "world_size": 1, "bucket_mb": 1}
    assert comp.unmet(comp.impls["ddp"], point, "cuda") is None
    assert comp.unmet(comp.impls["ddp"], {**point, "world_size": 2}, "cuda") == "needs 2 GPUs, 1 visible"
    assert comp.impls["ddp"].needs.unmet("cuda") == "needs 2 GPUs, 1 visible"  # what the runner asked before
