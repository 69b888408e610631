"""pytest plugin (entry point `llm_bench`): time registered points under pytest-benchmark with the suite's timer.

    def test_rmsnorm_triton(bench_point):
        bench_point("rmsnorm", "triton", "fwd", {"tokens": 4096, "dim": 4096}, "bf16")

`bench_point` checks the case against the float64 reference (a mismatch fails the test), times it with
bench/timing.py and hands the samples to pytest-benchmark, so `pytest --benchmark-autosave`,
`--benchmark-compare` and `--benchmark-json` work as usual. Imports torch only when the fixture is used.
"""
from __future__ import annotations

import pytest


@pytest.fixture
def bench_point(request):
    benchmark = request.getfixturevalue("benchmark")

    def run(component: str, impl: str, mode: str, point: dict, dtype: str = "fp32", device: str | None = None,
            quick: bool = False) -> dict:
        import torch

        from bench import registry, roofline
        from bench.calibrate import spec_for
        from bench.execute import Case, Worker
        from bench.timing import TimingConfig

        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        worker = Worker(dev, TimingConfig.quick() if quick else TimingConfig.for_device(dev))
        row = worker.measure(Case(component, impl, mode, point, dtype))
        if row["status"] == "skipped":
            pytest.skip(row["reason"])
        if row["status"] != "ok":
            pytest.fail(f"{component}:{impl} {row['status']}: {row.get('reason')}")
        if not row.get("samples_ms"):
            pytest.skip(row.get("reason") or "not timed here")
        # pytest-benchmark has no public way to take samples timed elsewhere; _make_stats is what its own
        # pedantic mode uses to open a result, and update() adds one round (in seconds).
        stats = benchmark._make_stats(1)
        for s in row["samples_ms"]:
            stats.update(s / 1e3)
        spec = spec_for(dev)
        row["dtype"] = dtype
        roofline.annotate(row, registry.get(component).cost(point, dtype, mode), spec)
        benchmark.extra_info.update({k: row.get(k) for k in ("flops", "bytes", "predicted_ms", "bound",
                                                             "roofline_pct", "tflops", "gbps", "rel_err")})
        return row

    return run
