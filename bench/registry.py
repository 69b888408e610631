"""Components and their implementations.

A component (one module in impls/) declares its axes, input factory, cost model, float64 reference and
tolerances; implementations register on it by decorator with the needs they have. `discover()` imports every
module of impls/ once so that the registry is complete.
"""
from __future__ import annotations

import importlib
import os
import importlib.util
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Any, Callable

MODES = ("fwd", "bwd", "fwd_bwd", "step")
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16")


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class Cost:
    """FLOPs done and the fewest bytes that must cross device memory.

    `math` says which unit the FLOPs run on: "tensor" (matrix units, peak per dtype) or "vector"
    (plain fp32 arithmetic). `comm_bytes` is what crosses the interconnect for multi-rank work.
    """

    flops: float
    bytes: float
    math: str = "vector"
    comm_bytes: float = 0.0

    def __add__(self, other: "Cost") -> "Cost":
        math = "tensor" if "tensor" in (self.math, other.math) else "vector"
        return Cost(self.flops + other.flops, self.bytes + other.bytes, math, self.comm_bytes + other.comm_bytes)


@dataclass(frozen=True)
class Needs:
    cuda: bool = False
    triton: bool = False
    world_size: int = 1
    min_cc: tuple[int, int] | None = None
    modules: tuple[str, ...] = ()

    def unmet(self, device: str) -> str | None:
        """Why these needs are not met on `device` ("cpu" or "cuda"), or None when they are."""
        for mod in self.modules:
            if importlib.util.find_spec(mod) is None:
                return f"module {mod!r} is not installed"
        if self.triton and importlib.util.find_spec("triton") is None:
            return "triton is not installed"
        if self.cuda and device != "cuda":
            return "needs a CUDA GPU"
        if device == "cuda" or self.min_cc:
            import torch

            if device == "cuda" and not torch.cuda.is_available():
                return "no CUDA GPU is visible"
            if self.min_cc and device == "cuda" and torch.cuda.get_device_capability() < self.min_cc:
                cc = torch.cuda.get_device_capability()
                return f"needs compute capability >= {self.min_cc}, this GPU has {cc}"
        if self.world_size > 1:
            import torch

            have = torch.cuda.device_count() if device == "cuda" else 2**31
            if self.world_size > have:
                return f"needs {self.world_size} GPUs, {have} visible"
        return None


@dataclass
class Impl:
    component: str
    name: str
    build: Callable[..., Callable]  # build(point, dtype, device) -> callable(**inputs)
    needs: Needs
    description: str
    writes_out: bool = False  # callable takes out= (a preallocated output the checker poisons)
    modes: tuple[str, ...] | None = None  # None: every mode of the component
    dtypes: tuple[str, ...] | None = None

    @property
    def interpreted_on_cpu(self) -> bool:
        """Triton kernels: on a CPU they run through the interpreter, checked but never timed."""
        return self.needs.triton

    @property
    def key(self) -> str:
        return f"{self.component}:{self.name}"

    def unsupported(self, mode: str, dtype: str) -> str | None:
        if self.modes is not None and mode not in self.modes:
            return f"{self.key} does not implement mode {mode!r}"
        if self.dtypes is not None and dtype not in self.dtypes:
            return f"{self.key} does not implement dtype {dtype!r}"
        return None


@dataclass
class Component:
    """One building block: everything shape-specific lives here, nothing in the harness."""

    name: str
    description: str
    axes: dict[str, type]
    make_inputs: Callable[..., dict[str, Any]]  # (point, dtype, device, seed) -> {name: tensor or config}
    cost: Callable[[dict, str, str], Cost]  # (point, dtype, mode) -> Cost
    reference: Callable[..., Any]  # plainest correct formula, run on float64 copies of the inputs
    tolerance: dict[str, float]  # dtype -> relative L2 error allowed on outputs
    modes: tuple[str, ...] = ("fwd", "fwd_bwd")
    dtypes: tuple[str, ...] = ("fp32", "bf16")
    grad_inputs: tuple[str, ...] = ()  # inputs whose gradients bwd modes compute and check
    grad_tolerance: dict[str, float] | None = None  # dtype -> allowed on gradients (default: tolerance)
    # (name, float64 inputs, float64 grad_outs) -> the size of the terms a gradient is computed from. Its error
    # is judged relative to max(its own norm, this): where terms of size O(1) cancel to nearly nothing (an
    # RMSNorm row of one element has dx ~ eps), no finite-precision kernel can match the tiny value closely.
    grad_scale: Callable[..., float | None] | None = None
    baseline: str = "eager"  # the implementation speedups are measured against
    # Row-slicing for checks whose float64 reference would not fit: inputs sliced along dim 0, and the
    # gradients that stay exact under that slice (row-local ones). See bench/check.py.
    row_sliced: tuple[str, ...] = ()
    row_local_grads: tuple[str, ...] = ()
    slice_dims: int = 1  # 2: dim 1 is independent too (attention's heads), sliced when one dim-0 row is too big
    # (point, mode) -> bytes the float64 reference needs, when its intermediates dwarf its inputs (attention's
    # S x S scores); default: a few times the fp64 inputs and outputs
    reference_bytes: Callable[[dict, str], int] | None = None
    # Multi-rank components run on every rank under torchrun (bench/distributed.py). Their contract differs:
    # make_inputs(point, dtype, device, seed, rank) and reference(point, dtype, seed, rank, world_size, n) ->
    # the first n elements this rank must end with, in float64. The world size is the point's `world_size`.
    ranked: bool = False
    # ranked components whose rows measure the share of a call spent in communication (a CUPTI trace of a few
    # calls on GPUs, bench/distributed.py): worth it for a training step, not for a bare collective (all of it)
    comm_share: bool = False
    impls: dict[str, Impl] = field(default_factory=dict)

    def world_size(self, impl: "Impl", point: dict) -> int:
        return int(point.get("world_size", impl.needs.world_size)) if self.ranked else impl.needs.world_size

    def unmet(self, impl: "Impl", point: dict, device: str) -> str | None:
        """Why `impl` cannot run `point` on `device`: its needs, with the ranks the point asks for (a
        data-parallel step of world_size 1 runs on one GPU, though its implementation lists 2 for `bench list`)."""
        return replace(impl.needs, world_size=self.world_size(impl, point)).unmet(device)

    def impl(
        self,
        name: str,
        *,
        description: str = "",
        cuda: bool = False,
        triton: bool = False,
        world_size: int = 1,
        min_cc: tuple[int, int] | None = None,
        modules: tuple[str, ...] = (),
        factory: bool = False,
        writes_out: bool = False,
        modes: tuple[str, ...] | None = None,
        dtypes: tuple[str, ...] | None = None,
    ) -> Callable:
        """Register an implementation. With factory=True the decorated function is called as
        f(point, dtype, device) and returns the callable (for setup such as torch.compile)."""
        if name != name.lower() or not name.replace("_", "").replace("-", "").isalnum():
            raise RegistryError(f"implementation names are short lowercase words, got {name!r}")

        def register(fn: Callable) -> Callable:
            if name in self.impls:
                raise RegistryError(f"{self.name}:{name} is registered twice")
            build = fn if factory else (lambda point, dtype, device, _fn=fn: _fn)
            doc = description or next(iter((fn.__doc__ or "").strip().splitlines()), "")
            self.impls[name] = Impl(
                component=self.name,
                name=name,
                build=build,
                needs=Needs(cuda=cuda, triton=triton, world_size=world_size, min_cc=min_cc, modules=modules),
                description=doc,
                writes_out=writes_out,
                modes=modes,
                dtypes=dtypes,
            )
            return fn

        return register


_COMPONENTS: dict[str, Component] = {}
_DISCOVERED = False


def component(name: str, **kwargs: Any) -> Component:
    """Declare a component; raises if the name is taken."""
    if name in _COMPONENTS:
        raise RegistryError(f"component {name!r} is declared twice")
    for mode in kwargs.get("modes", ()):
        if mode not in MODES:
            raise RegistryError(f"component {name!r}: unknown mode {mode!r}")
    comp = Component(name=name, **kwargs)
    _COMPONENTS[name] = comp
    return comp


def discover() -> dict[str, Component]:
    """Import every module of impls/ (once), then the modules named in $BENCH_PLUGINS (comma-separated,
    for components kept outside this repository, and for the tests' deliberately faulty ones)."""
    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        import impls

        for info in sorted(pkgutil.iter_modules(impls.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"impls.{info.name}")
        for mod in filter(None, (m.strip() for m in os.environ.get("BENCH_PLUGINS", "").split(","))):
            importlib.import_module(mod)
    return _COMPONENTS


def get(name: str) -> Component:
    comps = discover()
    if name not in comps:
        raise RegistryError(f"unknown component {name!r}")
    return comps[name]
