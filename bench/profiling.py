"""Names and ranges for profilers.

Every call the harness makes runs inside an NVTX range (on CUDA) and, while torch.profiler is recording, a
matching `record_function`. Timed calls are named `component:impl:mode:point` with the dtype folded into the
point (`rmsnorm:triton:fwd:tokens=4096,dim=4096,dtype=bf16`); warmup and check calls carry a `:warmup` or
`:check` suffix so that a filter on the plain name captures timed calls only. Names hold no '/': ncu's NVTX
filter reads it as nesting. A push/pop range belongs to the thread that pushed it: a backward, which autograd runs
on its worker thread for the GPU, gets the same ranges there (backward_in_ranges). Multi-rank calls
(bench.timing.time_ranked) carry the same names on every rank.
"""
from __future__ import annotations

import threading
import warnings
from contextlib import ExitStack, contextmanager, nullcontext

import torch

try:
    import nvtx as _nvtx
except ImportError:  # the nvtx package is optional at run time: torch carries its own NVTX bindings
    _nvtx = None

DOMAIN = "bench"


def range_name(case, phase: str = "timed") -> str:
    from bench.results import point_label

    name = f"{case.component}:{case.impl}:{case.mode}:{point_label({**case.point, 'dtype': case.dtype})}"
    return name if phase == "timed" else f"{name}:{phase}"


def nvtx_filter(name: str) -> str:
    """The `ncu --nvtx-include` expression for push/pop range `name` as this module emits it."""
    return f"{DOMAIN}@{name}/" if _nvtx is not None else f"{name}/"


def _profiler_on() -> bool:
    return torch.autograd.profiler._is_profiler_enabled


_thread = threading.local()  # .names: the push/pop ranges this thread has open, outermost first


def _open_names() -> list[str]:
    if not hasattr(_thread, "names"):
        _thread.names = []
    return _thread.names


def _push(name: str) -> None:
    if _nvtx is not None:
        _nvtx.push_range(name, domain=DOMAIN)
    else:
        torch.cuda.nvtx.range_push(name)


def _pop() -> None:
    if _nvtx is not None:
        _nvtx.pop_range(domain=DOMAIN)
    else:
        torch.cuda.nvtx.range_pop()


@contextmanager
def nvtx_range(name: str):
    _push(name)
    _open_names().append(name)
    try:
        yield
    finally:
        _open_names().pop()
        _pop()


@contextmanager
def backward_in_ranges(outputs):
    """Around a backward of `outputs` (loss.backward(), torch.autograd.grad): its kernels in this thread's open
    ranges. Autograd runs a backward of GPU tensors on its worker thread for the device, and a push/pop range
    belongs to the thread that pushed it: ncu's --nvtx-include caught none of a bwd case's kernels (H200, session
    57) and nsys left them outside their range. So the thread that runs the backward's first node pushes the same
    names before it, and pops them when the backward ends (autograd's final callback, run by the thread that
    finished the backward: the worker thread, for a graph all on one GPU); a backward that raises, or that another
    thread finished, has them popped there by `_pop_on`. The backward stays where training runs it. Run on the
    calling thread instead (session 57's way), the small LM's host-bound step read faster on three H100s (session
    58, baselines/h100/s58/): in `bench run` 26.1 ms against 38.9 (one after the other), 22.6-23.4 against
    24.6-30.2 and 24.7 against 24.8-27.3 (alternating), and 20.4 against 22.7 in alternating rounds of one
    process. A kernel's bwd row reads the same device time either way (the timer's spin kernel covers the host)."""
    names = list(_open_names())
    roots = [o.grad_fn for o in outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    if not names or not roots:
        yield
        return
    caller = threading.get_ident()
    pushed: dict = {}  # thread: the one that pushed the names, until it pops them; device: what its first node ran on

    def pop():
        if pushed["thread"] == threading.get_ident():
            for _ in names:
                _pop()
            pushed["thread"] = None

    def push(grad_outputs):
        if pushed or threading.get_ident() == caller:
            return
        pushed["thread"] = threading.get_ident()
        pushed["device"] = next((g.device for g in grad_outputs if isinstance(g, torch.Tensor)), None)
        for name in names:
            _push(name)
        torch.autograd.Variable._execution_engine.queue_callback(pop)

    handles = [r.register_prehook(push) for r in roots]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        if pushed.get("thread") and not _pop_on(pushed["thread"], pushed["device"], len(names)):
            warnings.warn(f"{names[0]}: a backward ended on another thread than it began, or raised, and its NVTX "
                          f"ranges could not be closed there: they stay open on that thread")


def _pop_on(thread: int, device, count: int) -> bool:
    """Pop `count` ranges on autograd's worker `thread`, left open there by a backward that raised (autograd runs
    final callbacks only after a backward that succeeds) or that another thread finished. Autograd keeps one worker
    thread per device, so a one-node backward on `device` runs on it. False where that ran elsewhere or failed."""
    popped = []

    def pop(grad_outputs):
        if threading.get_ident() == thread:
            for _ in range(count):
                _pop()
            popped.append(thread)

    try:
        with torch.enable_grad():
            leaf = torch.zeros((), device=device, requires_grad=True)
            node = leaf * 1
        node.grad_fn.register_prehook(pop)
        _backward(node)
    except Exception:  # a broken device (the backward's own error may have been a device-side assert)
        return False
    return bool(popped)


def _backward(t: torch.Tensor) -> None:
    t.backward()


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
