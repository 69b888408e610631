"""Generated from the registry: every implementation against the float64 reference on small and odd shapes,
each dtype and mode it supports, gradients included. Registering an implementation gives it these tests."""
import pytest

from bench import registry
from bench.check import check_impl

# Small, odd (non-power-of-two) points per component; the first is the one torch.compile impls get.
POINTS = {
    "matmul": [{"m": 37, "n": 123, "k": 45}, {"m": 1, "n": 5, "k": 300}, {"m": 64, "n": 64, "k": 64}],
    "rmsnorm": [{"tokens": 37, "dim": 123}, {"tokens": 1, "dim": 1}, {"tokens": 3, "dim": 5000},
                {"tokens": 2, "dim": 65537}],
    "layernorm": [{"tokens": 37, "dim": 123}, {"tokens": 1, "dim": 1}, {"tokens": 3, "dim": 5000},
                  {"tokens": 2, "dim": 65537}],
    "attention": [{"batch": 2, "heads": 3, "seq": 37, "head_dim": 16, "causal": True},
                  {"batch": 1, "heads": 2, "seq": 1, "head_dim": 64, "causal": False},
                  {"batch": 1, "heads": 2, "seq": 100, "head_dim": 64, "causal": True},
                  {"batch": 1, "heads": 1, "seq": 257, "head_dim": 16, "causal": False},
                  {"batch": 1, "heads": 1, "seq": 83, "head_dim": 40, "causal": True}],  # head_dim padded to 64
    "softmax": [{"rows": 37, "dim": 123}, {"rows": 1, "dim": 1}, {"rows": 3, "dim": 5000},
                {"rows": 2, "dim": 65537}],
}
COMPILED = {"compile"}  # torch.compile costs ~5-15 s a case on CPU: one point, one dtype per mode


def cases():
    for name, comp in sorted(registry.discover().items()):
        if name not in POINTS:
            continue
        for impl in comp.impls.values():
            if impl.needs.unmet("cpu") or impl.needs.world_size > 1:
                continue
            for i, point in enumerate(POINTS[name]):
                for dtype in comp.dtypes:
                    for mode in comp.modes:
                        if impl.unsupported(mode, dtype):
                            continue
                        if impl.name in COMPILED and (i > 0 or dtype != "fp32"):
                            continue
                        marks = [pytest.mark.slow] if impl.name in COMPILED else []
                        yield pytest.param(name, impl.name, point, dtype, mode, marks=marks,
                                           id=f"{name}-{impl.name}-{mode}-{dtype}-" + "x".join(map(str, point.values())))


def test_every_component_has_test_points():
    single = {n for n, c in registry.discover().items() if not c.ranked}  # ranked: tests/test_collectives.py
    missing = single - set(POINTS)
    assert not missing, f"add small odd points for {missing} to POINTS"


@pytest.mark.parametrize("component,impl,point,dtype,mode", list(cases()))
def test_matches_reference(component, impl, point, dtype, mode):
    comp = registry.get(component)
    result = check_impl(comp, impl, point, dtype, mode, seed=1234)
    assert result.ok, result.reason
    assert result.rel_err <= result.tol


def test_row_sliced_check_records_slice():
    """A point whose float64 reference is over budget is checked on its first rows, and says so."""
    comp = registry.get("rmsnorm")
    result = check_impl(comp, "eager", {"tokens": 64, "dim": 256}, "fp32", "fwd_bwd", budget_bytes=64 * 1024)
    assert result.ok, result.reason
    assert "checked rows [0:" in result.note and "of 64" in result.note
    assert "gradients of w not checked" in result.note



def test_head_sliced_check_for_attention():
    """Attention's float64 reference grows with S^2: when one batch element is over budget, the check slices heads
    too and says so."""
    comp = registry.get("attention")
    point = {"batch": 2, "heads": 4, "seq": 64, "head_dim": 16, "causal": True}
    budget = 64 * 64 * 8 * 8 * 2  # two heads' worth of fwd_bwd intermediates, under one batch element's four
    result = check_impl(comp, "sdpa", point, "fp32", "fwd_bwd", budget_bytes=budget)
    assert result.ok, result.reason
    assert "checked [0:1, 0:" in result.note and "of the leading [2, 4]" in result.note
    result = check_impl(comp, "naive", point, "fp32", "fwd", budget_bytes=budget)
    assert result.ok and "checked [0:1, 0:" in result.note
