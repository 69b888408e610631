"""The suite's only judge of whether outputs agree.

Every implementation at every point is compared with the component's float64 reference on fresh random
inputs: relative L2 error ||out - ref|| / ||ref|| against the dtype's tolerance, max abs error recorded,
any NaN/Inf fails, preallocated outputs are poisoned with NaN first, and in bwd modes the gradient of every
grad input is checked too. Where the float64 reference would not fit, the check runs on the first rows of
the problem (row_sliced inputs) and the row records that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from bench.profiling import backward_in_ranges
from bench.registry import Component, Impl

# Float64 reference working set allowed before the check falls back to a row slice: on a GPU a third of the
# memory free at that moment (the impl's own inputs and outputs are already allocated), on the CPU 2 GiB.
CPU_REF_BUDGET_BYTES = 2 * 2**30


def reference_budget(device: str) -> int:
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return int(free / 3)
    return CPU_REF_BUDGET_BYTES


@dataclass
class CheckResult:
    ok: bool
    rel_err: float
    max_abs_err: float
    tol: float
    reason: str = ""
    note: str = ""  # how the check was done when not on the whole problem

    def as_row(self) -> dict:
        return {"rel_err": self.rel_err, "max_abs_err": self.max_abs_err, "tol": self.tol, "check_note": self.note}


def as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(t for t in out if isinstance(t, torch.Tensor))


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, tol: float, scale: float | None = None) -> CheckResult:
    """Relative L2 error of `out` against `ref` (computed in float64), NaN/Inf always failing. With `scale`,
    the error is relative to max(||ref||, scale) (see Component.grad_scale)."""
    if out.shape != ref.shape:
        return CheckResult(False, math.inf, math.inf, tol, f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o = out.detach().to(torch.float64)
    r = ref.detach().to(device=o.device, dtype=torch.float64)
    bad = ~torch.isfinite(o) & torch.isfinite(r)
    if bad.any():
        n = int(bad.sum())
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        return CheckResult(False, math.inf, math.inf, tol, f"{name}: {n} non-finite element(s), first at {idx}")
    diff = o - r
    ref_norm = max(float(torch.linalg.vector_norm(r)), scale or 0.0)
    err_norm = float(torch.linalg.vector_norm(diff))
    rel = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    ok = rel <= tol
    return CheckResult(ok, rel, max_abs, tol, "" if ok else f"{name}: rel err {rel:.3g} > tol {tol:.3g}")


def worst(results: list[CheckResult]) -> CheckResult:
    failed = [r for r in results if not r.ok]
    pick = max(failed or results, key=lambda r: (r.rel_err / r.tol if r.tol else r.rel_err))
    return CheckResult(
        not failed, max(r.rel_err for r in results), max(r.max_abs_err for r in results), pick.tol,
        "; ".join(r.reason for r in failed), results[0].note,
    )


def grad_out(shape: tuple[int, ...], dtype: torch.dtype, device, seed: int) -> torch.Tensor:
    """The upstream gradient bwd modes use: random, fixed by the seed, in the output's dtype."""
    gen = torch.Generator(device=device).manual_seed(seed + 7)
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def grad_out_like(out: torch.Tensor, seed: int) -> torch.Tensor:
    return grad_out(tuple(out.shape), out.dtype, out.device, seed)


def poison_allocator(device: str, nbytes: int) -> None:
    """Leave NaN bytes (0xFF) in the caching allocator so an output allocated with torch.empty and only
    partly written shows NaN instead of stale zeros."""
    if device == "cuda" and nbytes > 0:
        torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(0xFF)


class Reference:
    """Float64 reference outputs (and gradients) for one point, computed once and shared by all impls."""

    def __init__(self, comp: Component, point: dict, dtype: str, mode: str, inputs: dict, device: str, seed: int,
                 budget_bytes: int | None = None):
        self.comp, self.mode, self.seed = comp, mode, seed
        self.tdtype = inputs_dtype(inputs)
        self.index: tuple[slice, ...] | None = None  # the leading slice checked when the whole would not fit
        self.lead: tuple[int, ...] = ()  # the full sizes of the sliced leading dims
        self.note = ""
        self.scales: dict = {}
        budget = budget_bytes if budget_bytes is not None else reference_budget(device)
        need = (comp.reference_bytes(point, mode) if comp.reference_bytes
                else comp.cost(point, "fp64", "fwd").bytes * (3 if mode == "fwd" else 6))
        if need > budget and comp.row_sliced:
            shape = inputs[comp.row_sliced[0]].shape
            per_row = need / shape[0]
            if per_row <= budget or comp.slice_dims < 2:
                rows = max(1, int(budget / per_row))
                self.index, self.lead = (slice(0, rows),), (shape[0],)
                self.note = f"checked rows [0:{rows}) of {shape[0]} (float64 reference too large)"
            else:
                cols = max(1, int(shape[1] * budget / per_row))
                self.index, self.lead = (slice(0, 1), slice(0, cols)), (shape[0], shape[1])
                self.note = (f"checked [0:1, 0:{cols}) of the leading [{shape[0]}, {shape[1]}] "
                             "(float64 reference too large)")
            skipped = [g for g in comp.grad_inputs if g not in comp.row_local_grads]
            if mode != "fwd" and skipped:
                self.note += f"; gradients of {', '.join(skipped)} not checked"
        ins = self._slice(inputs)
        ref_in = {k: (v.detach().to(torch.float64).requires_grad_(k in comp.grad_inputs and mode != "fwd")
                      if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                  for k, v in ins.items()}
        self.grad_names = [g for g in comp.grad_inputs if self.index is None or g in comp.row_local_grads]
        if mode == "fwd":
            with torch.no_grad():
                self.outputs = as_tuple(comp.reference(**ref_in))
            self.grads: tuple[torch.Tensor, ...] = ()
        elif mode in ("bwd", "fwd_bwd"):
            out = as_tuple(comp.reference(**ref_in))
            # The impl's grad_out is drawn over the whole output in its own dtype: draw the same, then slice.
            go = [self._slice_tensor(grad_out(self.full_shape(o), self.tdtype, o.device, seed)).to(torch.float64)
                  for o in out]
            grads = torch.autograd.grad(out, [ref_in[g] for g in comp.grad_inputs], go, allow_unused=True)
            by_name = dict(zip(comp.grad_inputs, grads))
            self.scales = {g: comp.grad_scale(g, {k: (v.detach() if isinstance(v, torch.Tensor) else v)
                                                  for k, v in ref_in.items()}, go) if comp.grad_scale else None
                           for g in comp.grad_inputs}
            self.outputs = tuple(o.detach() for o in out)
            self.grads = tuple(by_name[g] for g in self.grad_names)
        else:  # step: the reference returns whatever the step's result is
            self.outputs = as_tuple(comp.reference(**ref_in))
            self.grads = ()

    def _slice(self, inputs: dict) -> dict:
        if self.index is None:
            return inputs
        return {k: (v[self.index] if k in self.comp.row_sliced else v) for k, v in inputs.items()}

    def full_shape(self, t: torch.Tensor) -> tuple[int, ...]:
        """The shape of the impl's tensor that `t` (a reference output) is the checked slice of."""
        return (*self.lead, *t.shape[len(self.lead):])

    def out_like(self, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """Shape and dtype of the impl's outputs (meta tensors: nothing allocated), the whole of them when the
        reference holds a slice."""
        return tuple(torch.empty(self.full_shape(o), dtype=dtype, device="meta") for o in self.outputs)

    def _slice_tensor(self, t: torch.Tensor) -> torch.Tensor:
        return t if self.index is None else t[self.index]

    def tolerance(self, dtype: str, grad: bool) -> float:
        tols = (self.comp.grad_tolerance or self.comp.tolerance) if grad else self.comp.tolerance
        return tols[dtype]

    def judge(self, dtype: str, outputs: tuple, grads: dict[str, torch.Tensor]) -> CheckResult:
        results = []
        if self.mode != "bwd":
            if len(outputs) != len(self.outputs):
                return CheckResult(False, math.inf, math.inf, self.tolerance(dtype, False),
                                   f"{len(outputs)} outputs, reference has {len(self.outputs)}")
            for i, (o, r) in enumerate(zip(outputs, self.outputs)):
                results.append(compare(f"output {i}" if len(outputs) > 1 else "output", self._slice_tensor(o), r,
                                       self.tolerance(dtype, False)))
        for name, ref in zip(self.grad_names, self.grads):
            got = grads.get(name)
            if got is None:
                results.append(CheckResult(False, math.inf, math.inf, self.tolerance(dtype, True), f"grad {name}: not computed"))
                continue
            sliced = got if name not in self.comp.row_sliced else self._slice_tensor(got)
            results.append(compare(f"grad {name}", sliced, ref, self.tolerance(dtype, True), self.scales.get(name)))
        if not results:
            return CheckResult(True, 0.0, 0.0, self.tolerance(dtype, False), "", self.note)
        res = worst(results)
        res.note = self.note
        return res


def run_for_check(impl: Impl, fn: Callable, comp: Component, mode: str, inputs: dict, device: str, seed: int,
                  out_like: tuple[torch.Tensor, ...]) -> tuple[tuple, dict]:
    """Run `fn` once as `mode` does and return (outputs, gradients by input name)."""
    grads: dict[str, torch.Tensor] = {}
    if mode == "fwd":
        kwargs = dict(inputs)
        if impl.writes_out:
            outs = tuple(torch.full_like(r, math.nan, dtype=inputs_dtype(inputs), device=device) for r in out_like)
            kwargs["out"] = outs[0] if len(outs) == 1 else outs
        nbytes = sum(r.numel() for r in out_like) * 4
        poison_allocator(device, nbytes)
        with torch.no_grad():
            outputs = as_tuple(fn(**kwargs))
        return outputs, grads
    if mode in ("bwd", "fwd_bwd"):
        ins = with_grad(inputs, comp.grad_inputs)
        outputs = as_tuple(fn(**ins))
        go = [grad_out_like(o, seed) for o in outputs]
        names = [g for g in comp.grad_inputs]
        with backward_in_ranges(outputs):
            got = torch.autograd.grad(outputs, [ins[g] for g in names], go, allow_unused=True)
        grads = {n: g for n, g in zip(names, got) if g is not None}
        return tuple(o.detach() for o in outputs), grads
    return as_tuple(fn(**inputs)), grads


def inputs_dtype(inputs: dict) -> torch.dtype:
    for v in inputs.values():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v.dtype
    return torch.float32


def with_grad(inputs: dict, names: tuple[str, ...]) -> dict:
    return {k: (v.detach().requires_grad_(True) if k in names and isinstance(v, torch.Tensor) else v)
            for k, v in inputs.items()}


def check_impl(comp: Component, impl_name: str, point: dict, dtype: str, mode: str, device: str = "cpu",
               seed: int = 0, budget_bytes: int | None = None) -> CheckResult:
    """Check one implementation at one point, as `bench run` does, without timing it."""
    from bench.dtypes import precision, torch_dtype

    impl = comp.impls[impl_name]
    with precision(dtype):
        fn = impl.build(point, dtype, device)
        inputs = comp.make_inputs(point, torch_dtype(dtype), device, seed)
        ref = Reference(comp, point, dtype, mode, inputs, device, seed, budget_bytes)
        outputs, grads = run_for_check(impl, fn, comp, mode, inputs, device, seed, ref.out_like(torch_dtype(dtype)))
        return ref.judge(dtype, outputs, grads)
