"""Multi-rank components through torchrun with 2 gloo ranks: every collective agrees with its float64
reference on every rank, and rows carry nccl-tests' bus bandwidth."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import registry, results

ROOT = Path(__file__).parent.parent


@pytest.mark.slow
def test_collectives_match_reference_on_two_gloo_ranks(tmp_path):
    out = tmp_path / "c.jsonl"
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "run", "collectives-cpu", "--device", "cpu", "--out",
                           str(out), "--quick-timing", "--no-report"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = results.read_rows(out)
    assert len(rows) == 8
    for r in rows:
        assert r["status"] == "ok", r["reason"]
        assert r["world_size"] == 2 and r["rel_err"] <= r["tol"]
        assert r["busbw_gbps"] > 0 and r["n"] >= 10


def test_references_by_hand():
    comp = registry.get("collectives")
    point = {"op": "all_reduce", "mb": 1, "world_size": 2}
    x0 = comp.make_inputs(point, torch.float32, "cpu", 5, 0)["x"].double()
    x1 = comp.make_inputs(point, torch.float32, "cpu", 5, 1)["x"].double()
    assert not torch.equal(x0, x1) and x0.std() > 0.1  # random-looking, rank-specific, never constant
    (ref,) = comp.reference(point, "fp32", 5, 0, 2, 100)
    assert torch.equal(ref, (x0 + x1)[:100])
    (rs,) = comp.reference({**point, "op": "reduce_scatter"}, "fp32", 5, 1, 2, 100)
    half = x0.numel() // 2
    assert torch.equal(rs, (x0 + x1)[half:half + 100])
    ag_point = {**point, "op": "all_gather"}
    g0 = comp.make_inputs(ag_point, torch.float32, "cpu", 5, 0)["x"].double()
    g1 = comp.make_inputs(ag_point, torch.float32, "cpu", 5, 1)["x"].double()
    (ag,) = comp.reference(ag_point, "fp32", 5, 1, 2, g0.numel() + 10)
    assert torch.equal(ag, torch.cat([g0, g1[:10]]))


def test_bus_bytes_follow_nccl_tests():
    cost = registry.get("collectives").cost
    size = 256 * 2**20
    for op, factor in (("all_reduce", 2 * 3 / 4), ("all_gather", 3 / 4), ("reduce_scatter", 3 / 4), ("broadcast", 1)):
        assert cost({"op": op, "mb": 256, "world_size": 4}, "bf16", "fwd").comm_bytes == pytest.approx(size * factor)
