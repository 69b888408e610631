"""Names and ranges for profilers.

Every call the harness makes runs inside an NVTX range (on CUDA) and, while torch.profiler is recording, a
matching `record_function`. Timed calls are named `component:impl:mode:point` with the dtype folded into the
point (`rmsnorm:triton:fwd:tokens=4096,dim=4096,dtype=bf16`); warmup and check calls carry a `:warmup` or
`:check` suffix so that a filter on the plain name captures timed calls only. Names hold no '/': ncu's NVTX
filter reads it as nesting. A push/pop range belongs to the thread that pushed it: the harness runs backwards on
that thread (bench.check.backward_on_this_thread), not on autograd's worker thread for the GPU. Multi-rank calls
(bench.timing.time_ranked) carry the same names on every rank.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager, nullcontext

import torch

try:
    import nvtx as _nvtx
except ImportError:  # the nvtx package is optional at run time: torch carries its own NVTX bindings
    _nvtx = None

DOMAIN = "bench"


def range_name(case, phase: str = "timed") -> str:
    from bench.execute import point_label

    name = f"{case.component}:{case.impl}:{case.mode}:{point_label({**case.point, 'dtype': case.dtype})}"
    return name if phase == "timed" else f"{name}:{phase}"


def nvtx_filter(name: str) -> str:
    """The `ncu --nvtx-include` expression for push/pop range `name` as this module emits it."""
    return f"{DOMAIN}@{name}/" if _nvtx is not None else f"{name}/"


def _profiler_on() -> bool:
    return torch.autograd.profiler._is_profiler_enabled


@contextmanager
def nvtx_range(name: str):
    if _nvtx is not None:
        with _nvtx.annotate(name, domain=DOMAIN):
            yield
    else:
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()


def named(name: str):
    """An inner phase range inside an implementation (e.g. `scores`, `softmax`); free when nobody listens."""
    stack = ExitStack()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        stack.enter_context(nvtx_range(name))
    if _profiler_on():
        stack.enter_context(torch.profiler.record_function(name))
    return stack


def call_range(case, phase: str):
    """The range one harness call of `case` runs in; `phase` is timed, warmup or check."""
    on_cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    profiling = _profiler_on()
    if not (on_cuda or profiling):
        return nullcontext()
    return named(range_name(case, phase))
