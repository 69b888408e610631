"""bench trace on CPU: named ranges per call (warmup told apart), a kernel table, and --nsys without nsys."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
NAME = "rmsnorm:eager:fwd:tokens=64,dim=128,dtype=fp32"


def bench(*args, env=None):
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.slow
def test_trace_file_has_named_ranges_and_kernel_table(tmp_path):
    proc = bench("trace", "--component", "rmsnorm", "--impl", "eager", "--point", "tokens=64,dim=128",
                 "--device", "cpu", "--calls", "4", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    traces = list(tmp_path.glob("trace-*.json"))
    assert len(traces) == 1
    events = json.loads(traces[0].read_text())["traceEvents"]
    names = [e.get("name") for e in events if e.get("ph") == "X"]
    assert names.count(NAME) == 4  # every timed call, under the documented name
    assert names.count(NAME + ":warmup") == 2  # warmup calls carry their own suffix
    assert "aten::mean" in proc.stdout and "share" in proc.stdout  # the table is not empty


def test_nsys_missing_prints_the_command(tmp_path):
    import os

    env = dict(os.environ, PATH=str(Path(sys.executable).parent))  # no nsys on this PATH
    proc = bench("trace", "--component", "rmsnorm", "--impl", "eager", "--point", "tokens=64,dim=128",
                 "--device", "cpu", "--nsys", "--out", str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "nsys was not found" in proc.stdout
    assert "nsys profile -t cuda,nvtx" in proc.stdout and "--plain" in proc.stdout


def test_range_names_have_no_slash():
    from bench.execute import Case
    from bench.profiling import range_name

    name = range_name(Case("attention", "naive", "fwd", {"seq": 128, "causal": True}, "bf16"))
    assert "/" not in name and " " not in name
    assert name == "attention:naive:fwd:seq=128,causal=True,dtype=bf16"
    assert range_name(Case("a", "b", "fwd", {"n": 1}, "fp32"), "warmup").endswith(":warmup")


def test_bad_trace_arguments_exit_2():
    assert bench("trace", "--component", "rmsnorm", "--point", "tokens=4", "--device", "cpu").returncode == 2
    assert bench("trace", "--point", "tokens=4,dim=4", "--device", "cpu").returncode == 2
    assert bench("trace", "--component", "nope", "--point", "n=1", "--device", "cpu").returncode == 2


def test_triton_on_cpu_without_the_interpreter_is_a_clear_error(tmp_path):
    """Triton on a CPU runs only through its interpreter, chosen before the kernels are imported: without
    TRITON_INTERPRET=1 the trace is refused up front, not ended by Triton's "0 active drivers" traceback."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # conftest sets it for the tests
    proc = bench("trace", "--component", "rmsnorm", "--impl", "triton", "--point", "tokens=64,dim=128",
                 "--device", "cpu", "--out", str(tmp_path), env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Triton kernels need a CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())  # refused before anything ran


def test_ncu_that_profiles_nothing_is_a_clear_error(tmp_path):
    """An ncu that catches no kernel in the case's range (as it did for backward cases whose kernels ran on
    autograd's worker thread) ends in its own words, not a traceback."""
    import os

    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==WARNING== No kernels were profiled.'\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    proc = bench("trace", "--component", "rmsnorm", "--impl", "eager", "--point", "tokens=64,dim=128",
                 "--device", "cpu", "--ncu", env=env)
    assert proc.returncode == 2, proc.stderr
    assert "ncu captured no kernel for rmsnorm:eager:fwd" in proc.stderr and "No kernels were profiled" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_trace_of_a_multi_rank_case_writes_a_trace_per_rank(tmp_path):
    """A collective over 2 gloo ranks: torchrun starts the ranks, each traces the same calls in the case's ranges;
    rank 0's table is printed."""
    proc = bench("trace", "--component", "collectives", "--impl", "torch", "--dtype", "fp32",
                 "--point", "op=all_reduce,mb=1,world_size=2", "--device", "cpu", "--calls", "3",
                 "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    name = "collectives:torch:fwd:op=all_reduce,mb=1,world_size=2,dtype=fp32"
    traces = sorted(tmp_path.glob("trace-*.json"))
    assert [t.name[-11:] for t in traces] == ["-rank0.json", "-rank1.json"]
    for t in traces:
        names = [e.get("name") for e in json.loads(t.read_text())["traceEvents"] if e.get("ph") == "X"]
        assert names.count(name) == 3 and names.count(name + ":warmup") == 2
        assert "gloo:all_reduce" in names
    assert "rank 0's aten ops" in proc.stdout and "rank 1's trace" in proc.stdout


def test_multi_rank_cases_that_cannot_be_traced_are_clear_errors():
    """ncu of several ranks (it replays a kernel alone while an NCCL kernel waits for its peers), more ranks than
    GPUs, and --memory on a CPU end in a sentence before torchrun starts."""
    point = ("--component", "collectives", "--impl", "torch", "--point", "op=all_reduce,mb=1,world_size=2")
    proc = bench("trace", *point, "--device", "cpu", "--ncu")
    assert proc.returncode == 2 and "ncu cannot replay the collectives of 2 ranks" in proc.stderr, proc.stderr
    proc = bench("trace", *point, "--device", "cpu", "--memory")
    assert proc.returncode == 2 and "--memory records CUDA allocations" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_point_on_the_command_line_is_checked_as_a_suite_is():
    """Choice axes (the LM's config) parse; a wrong name, value or missing axis is an error naming it."""
    from bench import registry
    from bench.suite import SuiteError, parse_point

    dp = registry.get("data_parallel")
    assert parse_point(dp, "batch=2,config=tiny-tied,seq=16,world_size=2,bucket_mb=1") == {
        "config": "tiny-tied", "batch": 2, "seq": 16, "world_size": 2, "bucket_mb": 1}
    assert parse_point(registry.get("attention"), "batch=1,heads=2,seq=64,head_dim=32,causal=True")["causal"] is True
    for spec, says in [("config=tiny-tid,batch=2,seq=16,world_size=2,bucket_mb=1", "did you mean 'tiny-tied'"),
                       ("config=tiny,batch=two,seq=16,world_size=2,bucket_mb=1", "batch: expected a positive integer"),
                       ("config=tiny,batch=0,seq=16,world_size=2,bucket_mb=1", "sizes must be positive"),
                       ("config=tiny,batch=2", "seq, world_size, bucket_mb: missing"),
                       ("config=tiny,bach=2", "did you mean 'batch'"),
                       ("config", "expected config=...")]:
        with pytest.raises(SuiteError, match=re.escape(says)):
            parse_point(dp, spec)
    proc = bench("trace", "--component", "data_parallel", "--point", "config=nope,batch=2,seq=16,world_size=2,"
                 "bucket_mb=1", "--device", "cpu")
    assert proc.returncode == 2 and "'nope' is not one of tiny" in proc.stderr and "Traceback" not in proc.stderr


def test_a_backward_on_another_thread_gets_the_open_ranges(monkeypatch):
    """Autograd runs a backward of GPU tensors on its worker thread, outside the ranges the calling thread has open.
    Here a Python thread stands in for that worker (a CPU backward runs on the thread that starts it): it pushes the
    same names before the backward's first node and pops them all when the backward ends; the caller's own ranges
    are untouched, and the hooks are gone afterwards."""
    import threading

    import torch

    from bench import profiling

    log = []
    monkeypatch.setattr(profiling, "_push", lambda name: log.append((threading.get_ident(), "push", name)))
    monkeypatch.setattr(profiling, "_pop", lambda: log.append((threading.get_ident(), "pop", None)))
    x = torch.ones(3, requires_grad=True)
    y = (x * 2).sum()
    main = threading.get_ident()
    with profiling.nvtx_range("call"), profiling.nvtx_range("backward"):
        with profiling.backward_in_ranges([y]):
            worker = threading.Thread(target=lambda: y.backward(retain_graph=True))
            worker.start()
            worker.join()
        y.backward(retain_graph=True)  # on this thread, no longer mirrored: nothing pushed
    assert x.grad.tolist() == [4.0, 4.0, 4.0]
    theirs = [(op, name) for t, op, name in log if t == worker.ident]
    assert theirs == [("push", "call"), ("push", "backward"), ("pop", None), ("pop", None)]
    ours = [(op, name) for t, op, name in log if t == main]
    assert ours == [("push", "call"), ("push", "backward"), ("pop", None), ("pop", None)]
    assert profiling._open_names() == []
    with profiling.backward_in_ranges([y]):  # no range open: nothing to carry
        y.backward()
    assert len(log) == 8


def test_a_backward_that_raises_on_another_thread_leaves_no_range_open(monkeypatch):
    """Autograd runs final callbacks only after a backward that succeeds, so a worker thread's ranges were left open
    by a backward that raised, and every later range on that thread nested under them. Now the context closes them
    on the worker with a one-node backward there; a persistent Python thread stands in for autograd's device worker,
    running both backwards (on a GPU autograd sends both to its one thread for the device)."""
    import queue
    import threading

    import torch

    from bench import profiling

    jobs: queue.Queue = queue.Queue()

    def serve():
        while (job := jobs.get()) is not None:
            fn, done = job
            try:
                done.put((fn(), None))
            except Exception as e:  # noqa: BLE001 - handed back to the caller
                done.put((None, e))

    def on_worker(fn):
        done: queue.Queue = queue.Queue()
        jobs.put((fn, done))
        value, error = done.get()
        if error:
            raise error
        return value

    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("boom")

    depth: dict[int, int] = {}
    log = []

    def push(name):
        depth[threading.get_ident()] = depth.get(threading.get_ident(), 0) + 1

    def pop():
        depth[threading.get_ident()] -= 1
        log.append(threading.get_ident())

    monkeypatch.setattr(profiling, "_push", push)
    monkeypatch.setattr(profiling, "_pop", pop)
    monkeypatch.setattr(profiling, "_backward", lambda t: on_worker(t.backward))
    worker = threading.Thread(target=serve)
    worker.start()
    try:
        x = torch.ones(3, requires_grad=True)
        y = Boom.apply(x).sum()
        with profiling.nvtx_range("call"), profiling.nvtx_range("backward"):
            with pytest.raises(RuntimeError, match="boom"):
                with profiling.backward_in_ranges([y]):
                    on_worker(y.backward)
        assert depth == {threading.get_ident(): 0, worker.ident: 0}
        assert log.count(worker.ident) == 2  # the two names pushed there, popped there

        monkeypatch.setattr(profiling, "_backward", lambda t: t.backward())  # the one-node backward runs here
        y = Boom.apply(x).sum()
        with profiling.nvtx_range("call"):
            with pytest.raises(RuntimeError), pytest.warns(UserWarning, match="stay open on that thread"):
                with profiling.backward_in_ranges([y]):
                    on_worker(y.backward)
        assert depth[worker.ident] == 1  # could not be closed, and said so
    finally:
        jobs.put(None)
        worker.join()


def test_kernel_table_leaves_the_named_ranges_out():
    """On a GPU the profiler projects each named range (the call's, a step's `backward`) onto the device with a
    self time of its own; those are no kernels, and counted in they took a quarter of a norm's table."""
    import types

    import torch

    from bench.trace import kernel_table

    def evt(key, us, annotation):
        return types.SimpleNamespace(key=key, self_device_time_total=us, count=5, is_user_annotation=annotation,
                                     device_type=torch.autograd.DeviceType.CUDA)

    prof = types.SimpleNamespace(key_averages=lambda: [
        evt("_rmsnorm_bwd_kernel", 300.0, False), evt("rmsnorm:triton:bwd:tokens=8,dim=8,dtype=bf16", 200.0, True),
        evt("_sum_partials_kernel", 100.0, False)])
    rows = kernel_table(prof, "cuda", 5)
    assert [r["kernel"] for r in rows] == ["_rmsnorm_bwd_kernel", "_sum_partials_kernel"]
    assert [r["share"] for r in rows] == [0.75, 0.25]
