"""bench trace on CPU: named ranges per call (warmup told apart), a kernel table, and --nsys without nsys."""
import json
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
