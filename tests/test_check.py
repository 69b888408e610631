"""The checker must catch wrong implementations: zeros, 1% off, one NaN, a partly unwritten output."""
import math

import pytest
import torch

from bench.check import check_impl
from bench.registry import Component, Cost, RegistryError

import impls.rmsnorm as rms


def _component():
    """An unregistered copy of rmsnorm's contract, so deliberately wrong impls stay out of the registry."""
    return Component(name="rmsnorm_wrong", description="", axes={"tokens": int, "dim": int},
                     make_inputs=rms.make_inputs, cost=rms.cost, reference=rms.reference,
                     tolerance={"fp32": 1e-5, "bf16": 1e-2}, grad_tolerance={"fp32": 1e-5, "bf16": 2e-2},
                     modes=("fwd", "fwd_bwd"), grad_inputs=("x", "w"))


@pytest.fixture
def comp():
    c = _component()

    @c.impl("right", writes_out=True)
    def right(x, w, out=None):
        y = rms.rmsnorm_eager(x, w)
        if out is not None:
            out.copy_(y)
            return out
        return y

    @c.impl("zeros")
    def zeros(x, w):
        return torch.zeros_like(x)

    @c.impl("off1pct")
    def off(x, w):
        return rms.rmsnorm_eager(x, w) * 1.01

    @c.impl("one_nan")
    def one_nan(x, w):
        y = rms.rmsnorm_eager(x, w).clone()
        y[3, 5] = math.nan
        return y

    @c.impl("partial_out", writes_out=True)
    def partial(x, w, out=None):
        y = rms.rmsnorm_eager(x, w)
        out[:-1].copy_(y[:-1])  # forgets the last row
        return out

    @c.impl("bad_grad")
    def bad_grad(x, w):
        # Right forward, gradient of x scaled by 1.05 through a custom backward.
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g * 1.05

        return rms.rmsnorm_eager(F.apply(x), w)

    return c


POINT = {"tokens": 37, "dim": 123}


def test_right_impl_passes(comp):
    for mode in ("fwd", "fwd_bwd"):
        res = check_impl(comp, "right", POINT, "fp32", mode)
        assert res.ok, res.reason
        assert res.rel_err < 1e-6


def test_zeros_fail(comp):
    res = check_impl(comp, "zeros", POINT, "fp32", "fwd")
    assert not res.ok
    assert res.rel_err == pytest.approx(1.0)


def test_one_percent_off_fails_in_fp32(comp):
    res = check_impl(comp, "off1pct", POINT, "fp32", "fwd")
    assert not res.ok
    assert res.rel_err == pytest.approx(0.01, rel=1e-3)
    assert "rel err" in res.reason


def test_single_nan_fails(comp):
    res = check_impl(comp, "one_nan", POINT, "fp32", "fwd")
    assert not res.ok
    assert "non-finite" in res.reason and "(3, 5)" in res.reason


def test_unwritten_part_of_preallocated_output_fails(comp):
    res = check_impl(comp, "partial_out", POINT, "fp32", "fwd")
    assert not res.ok
    assert "non-finite" in res.reason  # the poisoned (NaN) rows show through


def test_wrong_gradient_fails(comp):
    assert check_impl(comp, "bad_grad", POINT, "fp32", "fwd").ok  # forward is right...
    res = check_impl(comp, "bad_grad", POINT, "fp32", "fwd_bwd")
    assert not res.ok and "grad x" in res.reason  # ...its gradient is not


def test_registering_twice_is_an_error(comp):
    with pytest.raises(RegistryError, match="registered twice"):
        @comp.impl("right")
        def again(x, w):
            return x


def test_cost_adds():
    c = Cost(1, 2, "vector") + Cost(3, 4, "tensor")
    assert (c.flops, c.bytes, c.math) == (4, 6, "tensor")


def test_grad_scale_does_not_hide_wrong_gradients_at_ordinary_shapes():
    """rmsnorm's condition-aware scale (for one-element rows) must still catch a 1% error in dx."""
    c = _component()
    c.grad_scale = rms.grad_scale

    @c.impl("dx_off")
    def dx_off(x, w):
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g * 1.01

        return rms.rmsnorm_eager(F.apply(x), w)

    res = check_impl(c, "dx_off", POINT, "fp32", "fwd_bwd")
    assert not res.ok and "grad x" in res.reason
    assert res.rel_err == pytest.approx(0.01, rel=0.2)
