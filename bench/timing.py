"""The suite's only timer.

GPU: CUDA events around each sample, L2 flushed before each sample (a buffer of twice the L2 size is claimed,
its lines' eviction priority reset and zeroed: kernels.l2) and the stream held by a spin kernel while the host
issues the call, warmup until steady, then samples until a stopping rule holds; CUDA-graph replay only when asked
for (TimingConfig.cuda_graph). CPU: perf_counter with the same warmup and stopping rules. Host time per call is
recorded on both so launch-bound points can be told apart.
"""
from __future__ import annotations

import math
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, ContextManager

from scipy import stats


@dataclass(frozen=True)
class TimingConfig:
    warmup_min_calls: int = 3
    warmup_min_ms: float = 50.0  # wall time spent warming up at least
    warmup_max_ms: float = 2000.0
    steady_tol: float = 0.10  # warm once the last calls' median is within this of the ones before
    min_samples: int = 10
    max_samples: int = 2000
    min_time_ms: float = 100.0  # measured time summed over samples, at least
    max_time_s: float = 10.0  # stop sampling after this much wall time even if spread is above target
    rel_ci_target: float = 0.01  # stop once the 95% CI of the median is within +-1% of it
    flush_l2: bool = True
    # "never" (events around each call, every GPU point) | "auto" (a CUDA graph when one call is shorter than
    # graph_below_us) | "always". Events by default: on an H200 (session 46, explore126, bf16, 1.5-64 MiB) the
    # graph difference (_time_graph) read 1.8-2.7 us less than events around the same call, at every size, while
    # events recorded around each call inside the graph read as events do (-0.1 to +0.7 us). And "auto" judged a
    # call's length by events that include its host launch, so in session 45's norms suite three builtin rows (a
    # fast launch) took the graph and read 0.76-0.86x of session 38's, and every other row of those points events.
    cuda_graph: str = "never"
    graph_below_us: float = 15.0  # auto: replay through a CUDA graph when one call is shorter than this
    graph_target_us: float = 500.0  # calls captured per graph so that one replay lasts about this long

    @classmethod
    def for_device(cls, device: str) -> "TimingConfig":
        """The defaults for a device. On a CPU, shared cores rarely let the median's CI reach 1%: sampling stops
        after 3 s a point (rows record stopped_by), so the quick suite stays under a minute on 2 cores."""
        return cls(max_time_s=3.0) if device == "cpu" else cls()

    @classmethod
    def quick(cls) -> "TimingConfig":
        """For tests and CPU smoke runs: fewer and shorter samples."""
        return cls(warmup_min_ms=5.0, warmup_max_ms=200.0, min_time_ms=10.0, max_time_s=1.0, max_samples=200)


@dataclass
class Timing:
    samples_ms: list[float]  # device time per call (GPU) or wall time per call (CPU)
    cpu_ms: float  # median host time to issue one call
    first_call_ms: float  # first call: compile, autotune and lazy init land here, never in samples
    warmup_calls: int
    method: str  # "cuda_event" | "cuda_graph" | "perf_counter"
    stopped_by: str  # "ci" | "max_time" | "max_samples"
    l2_flushed: bool
    calls_per_sample: int = 1
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.samples_ms)

    def summary(self) -> dict:
        s = sorted(self.samples_ms)
        q = statistics.quantiles(s, n=5, method="inclusive") if len(s) > 1 else [s[0]] * 4
        return {
            "samples_ms": [round(x, 6) for x in self.samples_ms],
            "n": len(s),
            "median_ms": statistics.median(s),
            "p20_ms": q[0],
            "p80_ms": q[3],
            "mean_ms": statistics.fmean(s),
            "std_ms": statistics.stdev(s) if len(s) > 1 else 0.0,
            "cpu_ms": self.cpu_ms,
            "first_call_ms": self.first_call_ms,
            "warmup_calls": self.warmup_calls,
            "timer": self.method,
            "stopped_by": self.stopped_by,
            "l2_flushed": self.l2_flushed,
            "calls_per_sample": self.calls_per_sample,
            **self.extra,
        }


def median_ci(samples: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics (binomial)."""
    s = sorted(samples)
    n = len(s)
    if n < 6:
        return s[0], s[-1]
    lo = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5))
    hi = int(stats.binom.isf((1 - confidence) / 2, n, 0.5))
    return s[max(lo - 1, 0)], s[min(hi, n - 1)]


def rel_ci_halfwidth(samples: list[float]) -> float:
    lo, hi = median_ci(samples)
    med = statistics.median(samples)
    return (hi - lo) / 2 / med if med > 0 else math.inf


def _enough(samples: list[float], cfg: TimingConfig, started: float) -> str | None:
    n = len(samples)
    if n >= cfg.max_samples:
        return "max_samples"
    if n < cfg.min_samples or sum(samples) < cfg.min_time_ms:
        if time.perf_counter() - started > cfg.max_time_s and n >= 3:
            return "max_time"
        return None
    if rel_ci_halfwidth(samples) <= cfg.rel_ci_target:
        return "ci"
    if time.perf_counter() - started > cfg.max_time_s:
        return "max_time"
    return None


def _steady(times: list[float], tol: float) -> bool:
    if len(times) < 6:
        return False
    recent, before = statistics.median(times[-3:]), statistics.median(times[-6:-3])
    return abs(recent - before) <= tol * max(before, 1e-9)


class _L2Flusher:
    """Leaves L2 holding only lines of a buffer twice its size, dirty, so every sample starts with a cold cache.

    Zeroing, as nvbench and triton.testing.do_bench do, leaves L2 full of dirty lines, so the timed call pays for
    writing back data it did not produce; reading the buffer instead leaves clean lines. On an H200 (session 18,
    bf16 copy, events after each kind of flush) a copy took 18% less time after a read flush at 16 MB, 9% at 64 MB
    (32.6 us against 35.7), 3% at 256 MB and 1 GB; in session 25 (explore50) 18.0-18.3 against 20.3-21.2 us for
    32 MB in and 32 MB out, where Triton copies with evict_first loads or streaming stores were no faster. Zeroing
    stays: a kernel in a model runs after kernels that wrote their outputs, and with a read flush a call whose own
    outputs fit in L2 would not pay for writing them back within the timed window either, which undercounts
    exactly the small memory-bound calls the flush is for.

    Zeroing alone does not evict lines loaded with evict_last, nor reset an L2 line's eviction priority, so the
    buffer is first claimed and demoted (kernels.l2.reset_l2). NOTE: on H200s (session 44, bf16, 32 MiB), under
    zeroing alone a copy of x read 18.6-19.3 us through 2000 samples once the library's long-row softmax of x, or a
    kernel loading x with evict_last, had run, against 20.2-21.2 after any other call (explore121-123); and once a
    flush had left its own lines at evict_first, later plain zeroing read 19.9 against 20.4-20.7 (explore123). With
    the reset, copies of x read 20.4-20.5 us whatever was timed before them, the long-row softmax or rmsnorm of x
    included (explore124), and the softmax itself 25.7-25.9 (25.4-25.6 before: its own residue flattered it little).
    The reset has a cost of its own: under it, calls of a few microseconds read 2-8% slower than under zeroing alone,
    and 20 us calls 1-3% (H200, session 46, explore126-129: layernorm 1024 x 4096 9.2-9.7 against 8.6-9.2 us). It is
    the same with 500 us between the flush and the call, and with one more zeroing after the reset; ncu finds the
    same DRAM bytes under both (explore127). Taken apart on H100s (session 59, baselines/h100/s59/, explore136-137):
    it is the claim's read before the zeroing, and a plain read of the buffer, or of another buffer of its size,
    costs as much (layernorm 1024 x 4096, explore136: 10.30-10.34 against 9.76-9.86 us), through one to three more
    zeroings; the demotion costs nothing, a second zeroing nothing; the SM clock stayed at 1980 MHz. In a loop with
    the GPU idle between samples (explore138) it mostly went (the small copy and rmsnorm not slower, layernorm
    1024 x 4096 2.3%): it needs these back-to-back batches. What in the card keeps the state is not known: not L2's
    priorities, not the buffer's lines in L2, not the SM clock."""

    def __init__(self, device: int):
        import torch

        from kernels.l2 import LINE, priorities_supported

        dev = torch.device("cuda", device)
        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 50 * 2**20) or 50 * 2**20
        self.buf = torch.empty(math.ceil(2 * l2 / LINE) * LINE // 4, dtype=torch.int32, device=dev)  # whole lines
        self.priorities = priorities_supported(dev)
        self.method = "reset" if self.priorities else "zero"  # rows record it (l2_flush); bench compare names a change
        self()  # the reset's kernels compile here, not inside the first point's warmup
        torch.cuda.synchronize(dev)

    def __call__(self):
        from kernels.l2 import reset_l2

        reset_l2(self.buf, self.priorities)


_FLUSHERS: dict[int, _L2Flusher] = {}


def l2_flusher(device: int) -> _L2Flusher:
    """One flush buffer per device for the life of the process (allocated before memory is measured)."""
    if device not in _FLUSHERS:
        _FLUSHERS[device] = _L2Flusher(device)
    return _FLUSHERS[device]


def time_cpu(fn: Callable[[], object], cfg: TimingConfig, call_range: Callable[[str], ContextManager] | None = None) -> Timing:
    rng = call_range or (lambda phase: nullcontext())
    t0 = time.perf_counter()
    with rng("warmup"):
        fn()
    first = (time.perf_counter() - t0) * 1e3
    warm: list[float] = []
    started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        with rng("warmup"):
            fn()
        warm.append((time.perf_counter() - t0) * 1e3)
        spent = (time.perf_counter() - started) * 1e3
        if spent >= cfg.warmup_max_ms and len(warm) >= 1:
            break
        if len(warm) >= cfg.warmup_min_calls and spent >= cfg.warmup_min_ms and _steady(warm, cfg.steady_tol):
            break
    samples: list[float] = []
    started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        with rng("timed"):
            fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        why = _enough(samples, cfg, started)
        if why:
            break
    return Timing(samples, statistics.median(samples), first, len(warm), "perf_counter", why, False)


def time_cuda(fn: Callable[[], object], cfg: TimingConfig, call_range: Callable[[str], ContextManager] | None = None) -> Timing:
    import torch

    rng = call_range or (lambda phase: nullcontext())
    device = torch.cuda.current_device()
    flush = l2_flusher(device) if cfg.flush_l2 else (lambda: None)
    flush_method = getattr(flush, "method", None)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with rng("warmup"):
        fn()
    torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3

    # Warmup: each call timed with events so that "steady" is judged on device time; host time per call too.
    warm: list[float] = []
    warm_host: list[float] = []
    started = time.perf_counter()
    while True:
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with rng("warmup"):
            start.record()
            h0 = time.perf_counter()
            fn()
            warm_host.append((time.perf_counter() - h0) * 1e3)
            end.record()
        end.synchronize()
        warm.append(start.elapsed_time(end))
        spent = (time.perf_counter() - started) * 1e3
        if spent >= cfg.warmup_max_ms:
            break
        if len(warm) >= cfg.warmup_min_calls and spent >= cfg.warmup_min_ms and _steady(warm, cfg.steady_tol):
            break

    event_ms = statistics.median(warm[-3:])
    host_ms = statistics.median(warm_host[-3:])
    use_graph = cfg.cuda_graph == "always" or (cfg.cuda_graph == "auto" and event_ms * 1e3 < cfg.graph_below_us)
    if use_graph:
        timing = _time_graph(fn, cfg, rng, flush, event_ms, first, len(warm))
        if timing is not None:
            timing.extra.update(eager_event_ms=event_ms, launch_bound=timing.cpu_ms >= timing.summary()["median_ms"],
                                l2_flush=flush_method)
            return timing

    # Events time the device from the start event to the end event; if the host is still issuing the call when
    # the device gets there (Python wrappers, autograd, Triton's launcher), the gap is timed too.
    # NOTE: on an H200 (2026-11-29) F.rms_norm fp32 4096x4096 timed 46 us one run and 71 us the next that way,
    # with 27-31 us of host time per call. So, as nvbench does with its blocking kernel, a spin kernel holds the
    # stream after the L2 flush for longer than the host needs to issue the call; then the events see only
    # device work, and a sample the host was late for anyway is dropped (`on_time`). Launch-bound is reported
    # apart: host time per call >= device time.
    hold_ms = host_ms * 1.5 + 0.02

    samples: list[float] = []
    late: list[float] = []  # device times of samples the host was late for: kept only if nothing else comes
    host: list[float] = []
    started = time.perf_counter()
    batch = 5
    why = None
    while why is None:
        events = []
        hold = _spin_cycles(hold_ms)
        for _ in range(batch):
            flush()
            i0 = time.perf_counter()  # the spin cannot start before it is issued: the window opens here
            torch.cuda._sleep(hold)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with rng("timed"):
                start.record()
                h0 = time.perf_counter()
                fn()
                host.append((time.perf_counter() - h0) * 1e3)
                end.record()
                issued = (time.perf_counter() - i0) * 1e3
            events.append((start, end, issued))
        torch.cuda.synchronize()
        kept, dropped, hold_ms = on_time([(s.elapsed_time(e), issued) for s, e, issued in events], hold_ms)
        late += dropped
        for x in kept:
            samples.append(x)
            why = _enough(samples, cfg, started)
            if why:
                break
        if why is None and len(samples) < 3 and time.perf_counter() - started > 2 * cfg.max_time_s:
            samples += late  # the host never kept up: the events' time is all there is (late_samples says so)
            why = "max_time"
    timing = Timing(samples, statistics.median(host), first, len(warm), "cuda_event", why, cfg.flush_l2)
    timing.extra.update(eager_event_ms=event_ms, launch_bound=timing.cpu_ms >= timing.summary()["median_ms"],
                        late_samples=len(late), l2_flush=flush_method)
    return timing


# The autotuners' benchmark: time_cuda, briefly. Warm calls for 5 ms, then samples for 20 ms (3 at least; never
# stopped early by the CI rule), events around each call with the stream held while the host issues it, no graphs.
AUTOTUNE_TIMING = TimingConfig(warmup_min_ms=5.0, warmup_max_ms=5.0, min_samples=3, min_time_ms=0.0, max_time_s=0.02,
                               rel_ci_target=-1.0, cuda_graph="never")


def autotune_bench(fn: Callable[[], object], quantiles=None, **_):
    """A short device time of fn, in ms, for Triton's autotuner (its `do_bench`; the worker installs it for the
    kernels, kernels._autotune.set_benchmark): the median of time_cuda's samples under AUTOTUNE_TIMING, or the
    quantiles asked for. triton.testing.do_bench puts its events around the call while the host is still issuing
    it, so it times the host too: on an H200 (session 30, explore81, rmsnorm forward 1024 x 4096 bf16) it read
    9-25 us, spread over rounds, for configs that bench.timing read at 7.2-8.7, and in the norms suite it ranked a
    config that read 7.65 us above one that read 7.23."""
    import numpy as np

    samples = time_cuda(fn, AUTOTUNE_TIMING).samples_ms
    if quantiles is None:
        return statistics.median(samples)
    return [float(q) for q in np.quantile(samples, quantiles)]


def on_time(batch: list[tuple[float, float]], hold_ms: float) -> tuple[list[float], list[float], float]:
    """Which samples of a batch timed the device alone: (kept, dropped, the hold for the next batch).

    Each sample is (event time, host time from just before the spin kernel to just after the end event was
    issued). The spin starts no earlier than it was issued and runs hold_ms, so a sample whose call was issued
    within hold_ms found the device waiting on the spin, not on the host. A later one timed the host too
    (on an H200, 2026-11-30: a 20 us backward read 79 us median, p80 242 us, when the host stalled now and
    then). Late samples are dropped; the hold grows to 1.5x the batch's median issue time when that is longer.
    "Within" keeps a fifth of the hold in reserve: the spin counts clock cycles, and the clock may run faster
    than when its rate was probed."""
    kept = [ms for ms, issued in batch if issued < 0.8 * hold_ms]
    dropped = [ms for ms, issued in batch if issued >= 0.8 * hold_ms]
    if dropped:
        hold_ms = max(hold_ms, 1.5 * statistics.median(issued for _, issued in batch))
    return kept, dropped, hold_ms


_CYCLES_PER_MS: list[float] = []


def _spin_cycles(ms: float) -> int:
    """GPU clock cycles that torch.cuda._sleep spins for about `ms` (the rate measured once per process)."""
    import torch

    if not _CYCLES_PER_MS:
        probe = 5_000_000
        torch.cuda._sleep(probe)  # first launch loads the kernel
        rates = []
        for _ in range(3):  # the fastest clock seen: a spin then lasts at least `ms` unless the clock rises further
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(probe)
            end.record()
            end.synchronize()
            rates.append(probe / max(start.elapsed_time(end), 1e-3))
        _CYCLES_PER_MS.append(max(rates))
    return int(ms * _CYCLES_PER_MS[0])


def _time_graph(fn, cfg: TimingConfig, rng, flush, event_ms: float, first: float, warm_calls: int) -> Timing | None:
    """Device time of `fn` from CUDA-graph replays, with the host out of the way.

    Graph A holds `reps` x (flush L2, call); graph B holds `reps` x (flush L2). They are replayed alternately
    and a sample is (time(A) - time(B)) / reps: each call still starts from a cold L2, and the flushes cancel,
    but for what the call changes in the flush after it. It is the call's cost inside a graph, not the events'
    measure (1.8-2.7 us less on an H200, see TimingConfig.cuda_graph), so it is used only when asked for.
    Returns None when the call cannot be captured (host syncs, CPU work): the caller falls back to events.
    """
    import torch

    reps = max(2, min(200, int(cfg.graph_target_us / max(event_ms * 1e3, 1.0))))
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm the capture stream (cuBLAS workspaces, autograd buffers)
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        calls = torch.cuda.CUDAGraph()
        with torch.cuda.graph(calls):
            for _ in range(reps):
                flush()
                fn()
        flushes = None
        if cfg.flush_l2:
            flushes = torch.cuda.CUDAGraph()
            with torch.cuda.graph(flushes):
                for _ in range(reps):
                    flush()
        calls.replay()
        if flushes is not None:
            flushes.replay()
        torch.cuda.synchronize()
    except Exception:  # not capturable: the caller times with events
        torch.cuda.synchronize()
        return None

    def replay(graph) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    samples: list[float] = []
    host: list[float] = []
    started = time.perf_counter()
    why = None
    while why is None:
        base = replay(flushes) if flushes is not None else 0.0
        with rng("timed"):
            h0 = time.perf_counter()
            total = replay(calls)
            host.append((time.perf_counter() - h0) * 1e3)
        samples.append(max(total - base, 0.0) / reps)
        why = _enough(samples, cfg, started)
    # The host cost of one eager call, which the graph hides, measured apart for the launch-bound verdict.
    h = []
    for _ in range(5):
        h0 = time.perf_counter()
        fn()
        h.append((time.perf_counter() - h0) * 1e3)
    torch.cuda.synchronize()
    del calls, flushes
    return Timing(samples, statistics.median(h), first, warm_calls, "cuda_graph", why, cfg.flush_l2,
                  calls_per_sample=reps)


def time_call(fn: Callable[[], object], device: str, cfg: TimingConfig | None = None,
              call_range: Callable[[str], ContextManager] | None = None) -> Timing:
    """Time `fn` on `device` ("cpu" or "cuda"). `call_range(phase)` wraps every call (NVTX, profiler)."""
    cfg = cfg or TimingConfig()
    if device == "cuda":
        return time_cuda(fn, cfg, call_range)
    return time_cpu(fn, cfg, call_range)


def wall_clock() -> float:
    """Seconds since an arbitrary point; for durations outside sampling (compile time, budgets)."""
    return time.perf_counter()


def time_fixed(fn: Callable[[], object], device: str, iters: int, warmup: int = 3,
               sync: Callable[[], object] | None = None) -> list[float]:
    """Milliseconds per call over exactly `iters` calls after `warmup` calls: for collectives, where every rank
    must make the same number of calls (an adaptive stopping rule would deadlock them). `sync` (e.g. a
    barrier) runs before each sample so that ranks start together."""
    samples = []
    for i in range(warmup + iters):
        if sync:
            sync()
        if device == "cuda":
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            samples.append(ms)
    return samples


def time_ranked(fn: Callable[[], object], device: str, cfg: TimingConfig,
                call_range: Callable[[str], ContextManager] | None = None, warmup: int = 5) -> Timing:
    """The timer for multi-rank calls (collectives, data-parallel steps) inside torch.distributed.

    Every rank makes the same calls: ranks line up on a barrier before each sample, a sample is the slowest
    rank's time (all-reduce MAX), and rank 0 applies the stopping rule and broadcasts its decision, so no rank
    waits on a call another rank never makes. `call_range(phase)` wraps every call, as in `time`.
    """
    import torch
    import torch.distributed as dist

    rng = call_range or (lambda phase: nullcontext())
    dev = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")

    def one(phase: str) -> tuple[float, float]:
        dist.barrier()
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with rng(phase):
                start.record()
                h0 = time.perf_counter()
                fn()
                host = (time.perf_counter() - h0) * 1e3
                end.record()
            end.synchronize()
            return start.elapsed_time(end), host
        with rng(phase):
            h0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - h0) * 1e3
        return ms, ms

    t0 = time.perf_counter()
    with rng("warmup"):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup):
        one("warmup")
    samples: list[float] = []
    host: list[float] = []
    started = time.perf_counter()
    why = None
    while why is None:
        ms, h = one("timed")
        slowest = torch.tensor([ms], dtype=torch.float64, device=dev)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        samples.append(float(slowest.item()))
        host.append(h)
        verdict = _enough(samples, cfg, started) if dist.get_rank() == 0 else None
        stop = torch.tensor([1 if verdict else 0], dtype=torch.int32, device=dev)
        dist.broadcast(stop, src=0)
        if int(stop.item()):
            why = verdict or "rank 0"
    return Timing(samples, statistics.median(host), first, warmup, "cuda_event" if device == "cuda" else "perf_counter",
                  why, False)
