"""The pytest entry point times a registered point with the suite's timer and reports through pytest-benchmark."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

TEST = '''
def test_point(bench_point):
    row = bench_point("rmsnorm", "eager", "fwd", {"tokens": 64, "dim": 128}, "fp32", device="cpu", quick=True)
    assert row["rel_err"] < 1e-5
'''


@pytest.mark.slow
def test_bench_point_fixture_feeds_pytest_benchmark(tmp_path):
    (tmp_path / "test_x.py").write_text(TEST)
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_x.py"),
                           f"--benchmark-json={out}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    (b,) = data["benchmarks"]
    assert b["stats"]["rounds"] >= 10 and b["stats"]["median"] > 0
    assert b["extra_info"]["bound"] in ("memory", "compute", "launch")
