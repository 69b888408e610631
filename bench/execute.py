"""Measure one case (component x impl x mode x point x dtype) inside a worker process.

Order per case: needs -> build -> inputs -> check against the float64 reference -> time -> memory. Every
failure becomes a row status (skipped, mismatch, oom, error); nothing raises out of `measure`.
"""
from __future__ import annotations

import gc
import hashlib
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from bench import profiling, registry
from bench.check import Reference, as_tuple, grad_out_like, run_for_check, with_grad
from bench.dtypes import precision, torch_dtype
from bench.results import point_key, point_label
from bench.timing import TimingConfig, autotune_bench, l2_flusher, time_call, wall_clock


@dataclass(frozen=True)
class Case:
    component: str
    impl: str
    mode: str
    point: dict
    dtype: str

    @property
    def key(self) -> tuple:
        return case_key(self.component, self.impl, self.mode, self.point, self.dtype)

    @property
    def label(self) -> str:
        return f"{self.component}:{self.impl}:{self.mode}:{point_label(self.point)}:{self.dtype}"


def case_key(component: str, impl: str, mode: str, point: dict, dtype: str) -> tuple:
    return (component, impl, mode, point_key(point), dtype)


def point_seed(case: Case, base_seed: int) -> int:
    """Same inputs for every impl of a point; different inputs for different points."""
    h = hashlib.sha256(f"{case.component}|{point_label(case.point)}|{case.dtype}|{base_seed}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def make_timed_call(impl: registry.Impl, fn: Callable, comp: registry.Component, mode: str, inputs: dict,
                    device: str, seed: int, out_like: tuple) -> Callable[[], Any]:
    """The closure the timer calls: what one iteration of `mode` does, nothing else. `out_like` gives the shapes
    and dtypes of the outputs a `writes_out` impl writes into; empty (no reference was computed: `bench run
    --no-check`, `bench trace`), one call without `out` gives them."""
    if mode == "fwd":
        kwargs = dict(inputs)
        if impl.writes_out:
            if not out_like:
                with torch.no_grad():
                    out_like = tuple(o.detach() for o in as_tuple(fn(**inputs)))
            outs = tuple(torch.empty(r.shape, dtype=r.dtype, device=device) for r in out_like)
            kwargs["out"] = outs[0] if len(outs) == 1 else outs

        def call():
            with torch.no_grad():
                return fn(**kwargs)

        return call
    if mode in ("bwd", "fwd_bwd"):
        ins = with_grad(inputs, comp.grad_inputs)
        gi = [ins[g] for g in comp.grad_inputs]
        if mode == "fwd_bwd":
            go = None

            def call():
                nonlocal go
                out = as_tuple(fn(**ins))
                if go is None:
                    go = [grad_out_like(o, seed) for o in out]
                with profiling.backward_in_ranges(out):
                    return torch.autograd.grad(out, gi, go)

            return call
        out = as_tuple(fn(**ins))
        go = [grad_out_like(o, seed) for o in out]

        def call():
            with profiling.backward_in_ranges(out):
                return torch.autograd.grad(out, gi, go, retain_graph=True)

        return call
    return lambda: fn(**inputs)


def prepare_call(case: Case, device: str, seed: int = 0) -> Callable[[], Any]:
    """The timed closure of `case` outside a run (for `bench trace` and `bench crosscheck`), built exactly as
    `bench run` builds it. Raises ValueError when the case cannot run on `device`."""
    comp = registry.get(case.component)
    impl = comp.impls[case.impl]
    why = impl.needs.unmet(device) or impl.unsupported(case.mode, case.dtype)
    if why:
        raise ValueError(f"{case.label} cannot run here: {why}")
    pseed = point_seed(case, seed)
    tune_with_suite_timer(device)
    with precision(case.dtype):
        fn = impl.build(case.point, case.dtype, device)
        inputs = comp.make_inputs(case.point, torch_dtype(case.dtype), device, pseed)
        return make_timed_call(impl, fn, comp, case.mode, inputs, device, pseed, ())


def tune_with_suite_timer(device: str) -> None:
    """On a GPU, the kernels' autotuners time their candidates with the suite's timer (bench.timing.autotune_bench)
    instead of triton.testing.do_bench, so a traced or cross-checked case picks as `bench run` does."""
    if device == "cuda":
        from kernels import _autotune

        _autotune.set_benchmark(autotune_bench)


# The driver clears memory returned to it in the background, taking about a tenth of the bandwidth meanwhile
# (H200, explore88: 24 GiB in ~60 ms); the worker waits this long a GiB returned, with a margin, before going on.
CLEAR_MS_PER_GIB = 4.0


class Worker:
    """Holds what is worth keeping between cases of one worker: the last point's reference, and the memory the
    allocator has cached while the point stays the same (see _enter_point)."""

    def __init__(self, device: str, timing: TimingConfig, seed: int = 0, check: bool = True):
        self.device, self.timing, self.seed, self.check = device, timing, seed, check
        self._point_key: tuple | None = None
        self._ref: Reference | None = None
        registry.discover()
        tune_with_suite_timer(device)

    def measure(self, case: Case) -> dict:
        row = self._measure_safely(case)
        row["worker_pid"] = os.getpid()
        return row

    def _measure_safely(self, case: Case) -> dict:
        row: dict[str, Any] = {"status": "ok", "reason": ""}
        try:
            comp = registry.get(case.component)
            impl = comp.impls[case.impl]
        except (registry.RegistryError, KeyError) as e:
            return {"status": "error", "reason": str(e)}
        why = impl.needs.unmet(self.device) or impl.unsupported(case.mode, case.dtype)
        if why:
            return {"status": "skipped", "reason": why}
        self._enter_point(case)
        try:
            row.update(self._measure(comp, impl, case))
        except torch.OutOfMemoryError as e:
            row = {"status": "oom", "reason": first_line(e)}
        except Exception as e:  # an implementation that raises costs its own row, not the run
            row = {"status": "error", "reason": f"{type(e).__name__}: {first_line(e)}",
                   "traceback": traceback.format_exc(limit=-6)}
        if row["status"] in ("oom", "error"):
            self._release()  # the next case starts from a clean device
        else:
            gc.collect()  # the case's tensors go back to the allocator's cache
        return row

    def _enter_point(self, case: Case) -> None:
        """At a new point (component, mode, point, dtype), drop the last point's reference and return the memory
        the allocator has cached to the driver (see _release); between the implementations of one point it stays
        cached and their inputs and outputs reuse it, so only a new point pays the wait. While every case returned
        its memory, with no wait, a Triton case autotuned in the slow window that follows (H200, session 31,
        explore82: both 65536 x 16384 configs read 5-12% slow, and softmax's forward took 32 warps, 1.096 ms in
        the bench against 16 warps' 1.03)."""
        key = (case.component, case.mode, point_label(case.point), case.dtype)
        if key != self._point_key:
            self._ref = None
            self._release()
            self._point_key = key

    def _release(self) -> None:
        """Return the allocator's cached memory to the driver, then wait while the driver clears it: on an H200
        (session 32, explore88) a 2 GiB copy ran 11-13% slow for 60 ms after 24 GiB were returned and for 10 ms
        after 6 GiB, and at full speed from its first call after 24 GiB and 300 ms idle (CLEAR_MS_PER_GIB)."""
        gc.collect()
        if self.device == "cuda":
            cached = torch.cuda.memory_reserved()
            torch.cuda.empty_cache()
            returned = cached - torch.cuda.memory_reserved()
            if returned > 0:
                time.sleep(returned / 2**30 * CLEAR_MS_PER_GIB / 1e3)

    def _reference(self, comp, case: Case, inputs: dict, seed: int) -> Reference:
        """The point's float64 reference, computed by its first case that checks (see _enter_point)."""
        if self._ref is None:
            self._ref = Reference(comp, case.point, case.dtype, case.mode, inputs, self.device, seed)
        return self._ref

    def _measure(self, comp: registry.Component, impl: registry.Impl, case: Case) -> dict:
        row: dict[str, Any] = {}
        seed = point_seed(case, self.seed)
        dev = self.device
        if dev == "cuda":
            torch.cuda.reset_peak_memory_stats()
        with precision(case.dtype):
            forget_autotune_choices()
            t0 = wall_clock()
            fn = impl.build(case.point, case.dtype, dev)
            row["build_s"] = wall_clock() - t0
            row.update(getattr(fn, "row_info", {}))  # what an impl learned while building (e.g. SDPA's backend)
            inputs = comp.make_inputs(case.point, torch_dtype(case.dtype), dev, seed)
            ref = self._reference(comp, case, inputs, seed) if self.check else None
            if dev == "cuda":
                l2_flusher(torch.cuda.current_device())  # the autotuners flush with it too, timing flushed or not
                torch.cuda.synchronize()
                base_mem = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            out_like = ref.out_like(torch_dtype(case.dtype)) if ref else ()
            first_s = None
            if ref is not None:
                t0 = wall_clock()
                with profiling.call_range(case, "check"):
                    outputs, grads = run_for_check(impl, fn, comp, case.mode, inputs, dev, seed, out_like)
                if dev == "cuda":
                    torch.cuda.synchronize()
                first_s = wall_clock() - t0  # the impl's first call: compile, autotune, lazy init
                result = ref.judge(case.dtype, outputs, grads)
                row.update(result.as_row())
                del outputs, grads
                if not result.ok:
                    row.update(status="mismatch", reason=result.reason)
            if impl.interpreted_on_cpu and dev == "cpu":
                row["reason"] = (row.get("reason") + "; " if row.get("reason") else "") + \
                    "not timed: Triton runs through its CPU interpreter here"
                row.update(autotune_choices())
                return row
            call = make_timed_call(impl, fn, comp, case.mode, inputs, dev, seed, out_like)
            forget_autotune_picks()  # the row names the kernels the timed calls run (bwd: not the forward's)
            t0 = wall_clock()
            timing = time_call(call, dev, self.timing, lambda phase: profiling.call_range(case, phase))
            row["timing_s"] = wall_clock() - t0
        row.update(timing.summary())
        row.update(autotune_choices())
        first_s = first_s if first_s is not None else timing.first_call_ms / 1e3
        row["compile_s"] = max(0.0, first_s - timing.summary()["median_ms"] / 1e3) + row["build_s"]
        if dev == "cuda":
            row["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated() - base_mem)
        return row


def _autotuners() -> list:
    """Every triton.autotune'd kernel of the loaded kernels/ modules."""
    if "triton" not in sys.modules:
        return []
    from triton.runtime.autotuner import Autotuner

    found = []
    for name, mod in list(sys.modules.items()):
        if name.startswith("kernels.") and mod is not None:
            found += [v for v in vars(mod).values() if isinstance(v, Autotuner)]
    return found


def forget_autotune_choices() -> None:
    """Clear each autotuned kernel's record of its last config and of the timings it chose by, so that what a case
    ran (and whether it tuned) can be told apart."""
    forget_autotune_picks()
    for tuner in _autotuners():
        tuner.configs_timings = None


def forget_autotune_picks() -> None:
    """Clear each autotuned kernel's record of its last config but keep the timings it chose by: before the timed
    calls, so that a row names the configs of the kernels it timed. A bwd case runs the forward once to build the
    graph it differentiates; its kernels' picks (and their timings) are then left out of the row, and `bench
    compare` does not name a forward kernel's change as a cause of a slower backward."""
    for tuner in _autotuners():
        tuner.best_config = None


def _config_text(config) -> str:
    """"BM=128 BN=64 TMA=True warps=8 stages=3" for a triton.Config."""
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    parts += [f"warps={config.num_warps}", f"stages={config.num_stages}"]
    if getattr(config, "maxnreg", None):
        parts.append(f"maxnreg={config.maxnreg}")
    return " ".join(parts)


def _median_ms(timing) -> float:
    """The autotuner's timing of one config: a float, or [median, p20, p80] when it asked for quantiles."""
    return float(timing[0] if isinstance(timing, (list, tuple)) else timing)


def autotune_choices() -> dict:
    """{"kernel_configs": {kernel: "BM=128 BN=64 TMA=True warps=8 stages=3"}} for the autotuned kernels that ran
    since `forget_autotune_picks` (each one's config for the last shape it ran), or {} when none did; and
    {"autotune_ms": {kernel: {config: median ms}}}, fastest first, for those that benchmarked their candidates
    in this case (a shape new to the process: a pick taken from the autotuner's cache has none), so a pick can be
    checked against what the autotuner measured."""
    chosen, timings = {}, {}
    for tuner in _autotuners():
        config = getattr(tuner, "best_config", None)
        if config is not None:
            chosen[tuner.fn.__name__] = _config_text(config)
            measured = getattr(tuner, "configs_timings", None)
            if measured:
                timings[tuner.fn.__name__] = {_config_text(c): _median_ms(t) for c, t in
                                              sorted(measured.items(), key=lambda item: _median_ms(item[1]))}
    out = {"kernel_configs": dict(sorted(chosen.items()))} if chosen else {}
    if timings:
        out["autotune_ms"] = dict(sorted(timings.items()))
    return out


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:500] if text else type(e).__name__
