"""Cost models against counts done by hand, and the prediction arithmetic."""
import json
import os

import pytest

from bench import registry, roofline
from bench.registry import Cost


def test_matmul_cost_by_hand():
    cost = registry.get("matmul").cost
    m, n, k = 128, 64, 32
    fwd = cost({"m": m, "n": n, "k": k}, "bf16", "fwd")
    assert fwd.flops == 2 * m * n * k
    assert fwd.bytes == (m * k + k * n + m * n) * 2
    assert fwd.math == "tensor"
    assert cost({"m": m, "n": n, "k": k}, "fp32", "fwd").bytes == (m * k + k * n + m * n) * 4
    bwd = cost({"m": m, "n": n, "k": k}, "bf16", "bwd")  # dA = dC B^T, dB = A^T dC
    assert bwd.flops == 4 * m * n * k
    assert bwd.bytes == (m * k + k * n + m * n + m * k + k * n) * 2  # read A, B, dC; write dA, dB
    fb = cost({"m": m, "n": n, "k": k}, "bf16", "fwd_bwd")
    assert fb.flops == 6 * m * n * k
    assert fb.bytes == 2 * (m * k + k * n + m * n) * 2


def test_rmsnorm_cost_by_hand():
    cost = registry.get("rmsnorm").cost
    t, d = 4096, 1000
    fwd = cost({"tokens": t, "dim": d}, "bf16", "fwd")
    assert fwd.bytes == (t * d + d + t * d) * 2  # read x, w; write y
    assert fwd.math == "vector"
    bwd = cost({"tokens": t, "dim": d}, "fp32", "bwd")
    assert bwd.bytes == (t * d + d + t * d + t * d + d) * 4  # read x, w, dy; write dx, dw
    fb = cost({"tokens": t, "dim": d}, "bf16", "fwd_bwd")
    assert fb.bytes == (t * d + d + t * d) * 2 + (t * d + t * d + d) * 2  # + read dy; write dx, dw


SPEC = roofline.DeviceSpec(name="test", tensor_flops={"bf16": 1000e12, "fp32": 50e12, "tf32": 500e12},
                           vector_flops=50e12, mem_bw=4e12, launch_s=5e-6)


def test_prediction_takes_the_larger_bound():
    mem = roofline.predict(flops=1e9, nbytes=4e9, dtype="bf16", math="vector", spec=SPEC)
    assert mem["bound"] == "memory" and mem["predicted_ms"] == pytest.approx(1.0)
    comp = roofline.predict(flops=1e15, nbytes=1e9, dtype="bf16", math="tensor", spec=SPEC)
    assert comp["bound"] == "compute" and comp["predicted_ms"] == pytest.approx(1000.0)
    fp32 = roofline.predict(flops=1e15, nbytes=1e9, dtype="fp32", math="tensor", spec=SPEC)
    assert fp32["predicted_ms"] == pytest.approx(20000.0)  # exact fp32: the fp32 peak, not tf32's
    tiny = roofline.predict(flops=10, nbytes=10, dtype="bf16", math="vector", spec=SPEC)
    assert tiny["bound"] == "launch" and tiny["predicted_ms"] == pytest.approx(5e-3)
    assert "predicted_comm_ms" not in tiny
    assert "predicted_comm_ms" not in roofline.predict(1e9, 1e9, "bf16", "tensor", SPEC, comm_bytes=1e9)  # no bw known
    ring = roofline.DeviceSpec(**{**SPEC.__dict__, "interconnect_bw": 100e9})
    step = roofline.predict(flops=1e15, nbytes=1e9, dtype="bf16", math="tensor", spec=ring, comm_bytes=50e9)
    assert step["predicted_comm_ms"] == pytest.approx(500.0)  # 50 GB of bus bytes at 100 GB/s
    assert step["bound"] == "compute" and step["predicted_ms"] == pytest.approx(1000.0)


def test_a_collective_costs_at_least_the_interconnects_latency():
    """A small all-reduce is bound by the latency every collective pays, not by its bytes over the bus bandwidth
    (1 MB read 111 us on 2 x H200 against 3.6 us from bandwidth alone); a large one by its bytes. Uncalibrated
    (latency 0), bandwidth alone."""
    ring = roofline.DeviceSpec(**{**SPEC.__dict__, "interconnect_bw": 300e9, "comm_latency_s": 80e-6})
    small = roofline.predict(0, 2e6, "bf16", "vector", ring, comm_bytes=1e6)
    assert small["bound"] == "comm_latency" and small["predicted_ms"] == pytest.approx(0.080)
    assert small["predicted_comm_ms"] == pytest.approx(0.080)
    large = roofline.predict(0, 2e9, "bf16", "vector", ring, comm_bytes=1e9)
    assert large["bound"] == "comm" and large["predicted_ms"] == pytest.approx(1e9 / 300e9 * 1e3)
    assert roofline.predict(0, 10, "bf16", "vector", ring)["bound"] == "launch"  # no communication: no latency
    unknown = roofline.DeviceSpec(**{**SPEC.__dict__, "interconnect_bw": 300e9})
    assert roofline.predict(0, 2e6, "bf16", "vector", unknown, comm_bytes=1e6)["bound"] == "launch"
    spec = roofline.merge({"comm_latency_s": 80e-6, "interconnect_bw": 300e9}, roofline.datasheet("NVIDIA H200"), "H200")
    assert roofline.DeviceSpec.from_json(spec.to_json()).comm_latency_s == 80e-6
    old = spec.to_json()
    del old["comm_latency_s"]  # a calibration file written before the latency was measured
    assert roofline.DeviceSpec.from_json(old).comm_latency_s == 0.0


def test_annotate_fills_row_fields():
    row = {"dtype": "bf16", "median_ms": 2.0, "cpu_ms": 0.01}
    roofline.annotate(row, Cost(1e12, 2e9, "tensor"), SPEC)
    assert row["tflops"] == pytest.approx(500)
    assert row["gbps"] == pytest.approx(1000)
    assert row["intensity"] == pytest.approx(500)
    assert row["predicted_ms"] == pytest.approx(1.0) and row["bound"] == "compute"
    assert row["roofline_pct"] == pytest.approx(50.0)
    assert row["ceiling_source"] == "datasheet"


def test_datasheet_matches_device_names():
    assert roofline.datasheet("NVIDIA H200").mem_bw == 4.8e12
    assert roofline.datasheet("NVIDIA H100 80GB HBM3").name == "NVIDIA H100 SXM"
    assert roofline.datasheet("NVIDIA H100 PCIe").name == "NVIDIA H100 PCIe"
    assert roofline.datasheet("NVIDIA A100-SXM4-80GB").tensor_flops["bf16"] == 312e12
    assert roofline.datasheet("NVIDIA L4") is not None
    assert roofline.datasheet("NVIDIA GeForce RTX 4090") is not None
    assert roofline.datasheet("NVIDIA B200") is not None
    assert roofline.datasheet("cpu:Intel Xeon") is None


def test_calibration_cache_wins_over_datasheet(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    assert roofline.resolve("NVIDIA H200", "580").source == "datasheet"
    spec = roofline.merge({"mem_bw": 4.3e12, "tensor_flops": {"bf16": 790e12}}, roofline.datasheet("NVIDIA H200"), "NVIDIA H200")
    roofline.store(spec, "NVIDIA H200", "580")
    got = roofline.resolve("NVIDIA H200", "580")
    assert got.source == "calibrated" and got.mem_bw == 4.3e12 and got.tensor_flops["bf16"] == 790e12
    assert got.tensor_flops["tf32"] == 494e12  # not measured: datasheet kept
    assert roofline.resolve("NVIDIA H200", "999").source == "datasheet"  # another driver: not this cache entry


def test_a_calibration_of_one_rank_keeps_the_interconnect_an_earlier_one_measured():
    ar = {"world_size": 2, "busbw": 300e9}
    earlier = roofline.merge({"mem_bw": 4e12, "interconnect_bw": 300e9, "comm_latency_s": 8e-5, "allreduce": ar},
                             None, "H200")
    assert roofline.carried_comm({"mem_bw": 4.1e12}, earlier) == {"interconnect_bw": 300e9, "comm_latency_s": 8e-5,
                                                                 "allreduce": ar}
    assert roofline.carried_comm({"mem_bw": 4.1e12, "interconnect_bw": 280e9}, earlier) == {}  # measured anew
    assert roofline.carried_comm({"mem_bw": 4.1e12}, None) == {}
    assert roofline.carried_comm({}, roofline.datasheet("NVIDIA H200")) == {}  # the datasheet's link is no measurement


def test_a_quick_calibration_that_cannot_be_cached_still_serves_the_run(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("BENCH_CACHE_DIR", str(blocker / "cache"))
    said = []
    spec = roofline.store_quick_calibration({"mem_bw": 12.5e9, "tensor_flops": {"fp32": 3e11}}, "cpu:x", None,
                                            said.append)
    assert spec.mem_bw == 12.5e9 and spec.source == "calibrated (quick, automatic)"
    assert said == [f"warning: the ceilings were not cached ({blocker / 'cache'}: Not a directory); this run uses "
                    f"them, the next one measures again"]


def test_allreduce_bus_bandwidth_definition_gloo():
    """nccl-tests' definition: busbw = algbw * 2(n-1)/n, measured here with 2 gloo ranks, one size after another in
    one process group (the one-element all-reduce that gives the latency first). Definitions only: which of the
    two is faster is the machine's to say, and a timed unit test is not where that is checked."""
    from bench.calibrate import allreduce_runs

    tiny, r = allreduce_runs("cpu", 2, [4, 4 * 2**20], iters=5)
    assert tiny["bytes"] == 4 and r["bytes"] == 4 * 2**20
    # Both timed, nothing about their order: on CI's shared 2-core machine the one-element all-reduce once read
    # 3.71 ms against 3.23 for 4 MiB (stop 60's CI), gloo's per-call cost swamped by the machine's load.
    assert tiny["ms"] > 0 and r["ms"] > 0 and tiny["world_size"] == r["world_size"] == 2
    assert r["algbw"] == pytest.approx(4 * 2**20 / (r["ms"] * 1e-3))
    assert r["busbw"] == pytest.approx(r["algbw"] * 2 * 1 / 2)


def test_calibrate_use_takes_a_committed_calibration_for_this_machine(tmp_path):
    """`bench calibrate --use FILE` measures nothing: this device's ceilings from another machine's file (another
    driver) land in this machine's cache under its own key, so its runs are judged against the same roofline; a
    file of another device is an error that names what it holds."""
    import subprocess
    import sys

    from bench.results import device_name, environment

    env = environment("cpu")
    name = device_name(env, "cpu")
    spec = roofline.merge({"mem_bw": 12.5e9, "tensor_flops": {"fp32": 3e11}}, None, name)
    committed = tmp_path / "committed.json"
    committed.write_text(json.dumps({roofline.cache_key(name, "other-driver"): spec.to_json(),
                                     roofline.cache_key("NVIDIA H200", "580"): spec.to_json()}))
    cache = tmp_path / "cache"
    run = lambda f: subprocess.run([sys.executable, "-m", "bench.cli", "calibrate", "--device", "cpu", "--use", str(f)],  # noqa: E731
                                   capture_output=True, text=True, env={**os.environ, "BENCH_CACHE_DIR": str(cache)})
    proc = run(committed)
    assert proc.returncode == 0, proc.stderr
    assert f"{name}|driver=other-driver" in proc.stdout
    stored = json.loads((cache / "calibration.json").read_text())
    assert list(stored) == [roofline.cache_key(name, env.get("driver"))]
    assert stored[roofline.cache_key(name, env.get("driver"))]["mem_bw"] == 12.5e9
    other = tmp_path / "other.json"
    other.write_text(json.dumps({roofline.cache_key("NVIDIA H200", "580"): spec.to_json()}))
    proc = run(other)
    assert proc.returncode == 2 and f"holds no ceilings of {name}; it holds NVIDIA H200" in proc.stderr
