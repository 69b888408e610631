"""`bench run`, `bench list` and `bench calibrate` end to end on CPU, in subprocesses as a user runs them."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import results

ROOT = Path(__file__).parent.parent
SMALL = """\
suites:
  small:
    entries:
      - component: rmsnorm
        impls: [eager, builtin, triton]
        axes: {tokens: [16, 33], dim: 100}
        dtypes: [fp32, bf16]
        modes: [fwd, fwd_bwd]
      - component: matmul
        axes: {m: 33, n: 20, k: 17}
        dtypes: [fp32]
        modes: [fwd]
"""


def bench(*args, cwd=ROOT, timeout=300, check=True):
    proc = subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.slow
def test_run_writes_rows_table_and_roofline_fields(tmp_path):
    suites = tmp_path / "suites.yaml"
    suites.write_text(SMALL)
    out = tmp_path / "res.jsonl"
    proc = bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(out), "--quick-timing",
                 "--no-report")
    assert "summary" in proc.stdout and f"results: {out}" in proc.stdout
    df = results.load(out)
    assert len(df) == 2 * 2 * 2 * 3 + 2  # rmsnorm: points x dtypes x modes x impls; matmul: 2 impls
    # a log line a case (stdout is not a terminal): its place, the time so far and an estimate of what is left
    progress = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == len(df)
    assert re.match(r"\[1/26 0:00:\d\d, ~0:\d\d:\d\d left\] rmsnorm:eager:fwd:tokens=16,dim=100:fp32 ok ", progress[0])
    assert re.match(r"\[26/26 0:\d\d:\d\d\] matmul:", progress[-1])
    assert set(df["status"]) == {"ok"}
    timed = df[df["impl"] != "triton"]
    for col in ("median_ms", "p20_ms", "p80_ms", "n", "cpu_ms", "flops", "bytes", "intensity", "predicted_ms",
                "bound", "roofline_pct", "tflops", "gbps", "rel_err", "tol", "ceiling_source"):
        assert timed[col].notna().all(), col
    assert all(len(s) == n for s, n in zip(timed["samples_ms"], timed["n"]))
    tri = df[df["impl"] == "triton"]
    assert tri["median_ms"].isna().all() and tri["rel_err"].notna().all()  # checked, never timed on CPU
    assert all("interpreter" in r for r in tri["reason"])
    env = df.iloc[0]["env"]
    for key in ("torch", "python", "cpu"):
        assert env[key]
    assert df.iloc[0]["git_sha"]


def test_run_filters_by_mode(tmp_path):
    suites = tmp_path / "suites.yaml"
    suites.write_text(SMALL)
    out = tmp_path / "res.jsonl"
    bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(out), "--quick-timing",
          "--no-report", "--component", "rmsnorm", "--impl", "eager", "--mode", "fwd_bwd")
    df = results.load(out)
    assert len(df) == 2 * 2 and set(df["mode"]) == {"fwd_bwd"}  # 2 points x 2 dtypes, one mode
    again = bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(out), "--quick-timing",
                  "--no-report", "--component", "rmsnorm", "--impl", "eager", "--mode", "fwd_bwd", "--dtype", "fp32")
    assert f"{out} holds 4 rows already: this run's are appended" in again.stdout  # said, not done silently
    assert len(results.load(out)) == 4 + 2
    proc = bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(tmp_path / "none.jsonl"),
                 "--component", "matmul", "--mode", "bwd", check=False)
    assert proc.returncode != 0 and "--mode" in proc.stderr + proc.stdout and "no case" in proc.stderr + proc.stdout


def test_run_filters_by_point_and_scopes_impl_names_to_the_suite(tmp_path):
    suites = tmp_path / "suites.yaml"
    suites.write_text(SMALL + """\
  attn:
    entries:
      - component: attention
        axes: {batch: 1, heads: 2, seq: [8, 12], head_dim: 16, causal: true}
        dtypes: [fp32]
        modes: [fwd]
""")
    out = tmp_path / "res.jsonl"
    bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(out), "--quick-timing",
          "--no-report", "--impl", "eager", "--where", "tokens=33", "--mode", "fwd")
    df = results.load(out)
    assert len(df) == 2 and {p["tokens"] for p in df["point"]} == {33}  # one point x 2 dtypes
    out_bf16 = tmp_path / "bf16.jsonl"
    bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(out_bf16), "--quick-timing",
          "--no-report", "--impl", "eager", "--where", "tokens=33", "--mode", "fwd", "--dtype", "bf16")
    assert list(results.load(out_bf16)["dtype"]) == ["bf16"]
    out_both = tmp_path / "both.jsonl"  # one axis named twice: either value (the second used to replace the first)
    bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(out_both), "--quick-timing",
          "--no-report", "--impl", "eager", "--component", "rmsnorm", "--where", "tokens=16", "--where", "tokens=33",
          "--mode", "fwd", "--dtype", "fp32")
    assert sorted(p["tokens"] for p in results.load(out_both)["point"]) == [16, 33]
    # data_parallel also has a `naive` impl, which needs 2 GPUs; only the suite's own components count
    out2 = tmp_path / "attn.jsonl"
    bench("run", "attn", "--suites", str(suites), "--device", "cpu", "--out", str(out2), "--quick-timing",
          "--no-report", "--impl", "naive", "--where", "causal=true", "--where", "seq=12")
    df = results.load(out2)
    assert list(df["impl"]) == ["naive"] and df.iloc[0]["point"]["seq"] == 12 and df.iloc[0]["status"] == "ok"
    for args, message in ((("--impl", "fsdp1"), "no component of suite(s) small"),
                          (("--where", "tokens"), "AXIS=VALUE"),
                          (("--component", "matmul", "--dtype", "fp16"), "nothing to run"),
                          (("--where", "tokens=7"), "no case left has that value; tokens values: 16, 33"),
                          (("--where", "tokens=7", "--where", "tokens=8"), "--where tokens=7 or 8: no case left"),
                          (("--where", "seq=7"), "no case left has an axis 'seq'; axes: dim, k, m, n, tokens")):
        proc = bench("run", "small", "--suites", str(suites), "--device", "cpu", "--out", str(tmp_path / "x.jsonl"),
                     *args, check=False)
        assert proc.returncode != 0 and message in proc.stderr + proc.stdout, args


@pytest.mark.slow
def test_list_and_costs_and_calibrate(tmp_path):
    proc = bench("list", "--device", "cpu")
    assert "rmsnorm" in proc.stdout and "matmul" in proc.stdout and "checked only" in proc.stdout
    cal = bench("calibrate", "--device", "cpu", "--quick", "--world-size", "2")
    assert "memcpy bandwidth" in cal.stdout and "stored in" in cal.stdout
    assert "all-reduce 16 MiB over 2 ranks" in cal.stdout and "bus bandwidth" in cal.stdout
    assert "all-reduce of one element over 2 ranks" in cal.stdout and "all-reduce latency (2 ranks)" in cal.stdout
    one = bench("calibrate", "--device", "cpu", "--quick", "--world-size", "1")  # measures no interconnect ...
    assert "all-reduce 16 MiB" not in one.stdout and "kept the interconnect's ceilings" in one.stdout
    assert "all-reduce bus bw (2 ranks)" in one.stdout and "all-reduce latency (2 ranks)" in one.stdout  # ... keeps them
    costs = bench("list", "--costs", "matmul", "--suite", "matmul", "--device", "cpu")
    assert "8192" in costs.stdout and "compute" in costs.stdout
