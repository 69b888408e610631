"""The timer: agrees with an independent measurement, stops, and keeps slow first calls out."""
import statistics
import time
import timeit
import types

import pytest

from bench import timing
from bench.timing import TimingConfig, median_ci, time_call


def work():
    s = 0
    for i in range(60_000):
        s += i * i
    return s


def test_cpu_timer_matches_independent_measurement():
    """The same calls timed twice: by the timer and from inside the call (its own monotonic clock), so a noisy
    machine moves both alike; then timeit on other calls, interleaved round by round, as a gross check.
    NOTE: on the 2-core CI machine a timeit comparison alone read a steady 1.3x in one run (2026-11-30: ours
    3.15 ms, timeit's 10-call groups 2.41 in all 15 rounds) while other runs agreed within 6%; with two busy
    processes beside it here, 10-call groups read 1.8x ours (a group absorbs preemptions, a call's median does
    not). So timeit times single calls too, and is judged only against gross errors. The machine's speed also
    swings between rounds: in a clean clone's .ci/run beside a busy process (2026-12-02, five long rounds) every
    timeit round read 7.2-9.9 ms a call while two of ours read 3.7-4.1, and the fastest of each gave 0.51x. So the
    rounds are short and many, and each round's two readings, taken back to back, are compared with each other:
    the median of those ratios is judged."""
    inner: list[float] = []

    def timed_work():
        t0 = time.monotonic_ns()
        work()
        inner.append((time.monotonic_ns() - t0) / 1e6)

    cfg = TimingConfig(warmup_min_ms=10, min_time_ms=50, max_time_s=0.15, rel_ci_target=0.01)
    ours, theirs = [], []
    for _ in range(10):
        inner.clear()
        t = time_call(timed_work, "cpu", cfg)
        same_calls = inner[-t.n:]  # the sampled calls (warmup and the first call come before them)
        assert t.n == len(t.samples_ms) and len(same_calls) == t.n
        extra = sorted(got - ref for got, ref in zip(t.samples_ms, same_calls))  # the timer's own cost a call
        # the timer's own cost under 2% of the call (~0.05 ms; on the loaded CI machine it read 0.017-0.022 ms,
        # locally under 0.02); a preemption may land in a few calls, so the median is judged
        assert extra[0] >= 0 and extra[len(extra) // 2] < 0.02 * statistics.median(t.samples_ms), extra
        ours.append(statistics.median(t.samples_ms))
        theirs.append(statistics.median(timeit.repeat(work, number=1, repeat=20)) * 1e3)  # per call, as ours
    ratio = statistics.median(a / b for a, b in zip(ours, theirs))  # each round's two readings, back to back
    assert 0.6 < ratio < 1.6, (ours, theirs)


def test_stopping_rule_decisions():
    from bench.timing import _enough

    cfg = TimingConfig(min_samples=10, max_samples=50, min_time_ms=5, max_time_s=100, rel_ci_target=0.01)
    now = time.perf_counter()
    tight = [1.0 + 0.0001 * (i % 3) for i in range(20)]
    assert _enough(tight[:9], cfg, now) is None  # fewer than min_samples: keep going
    assert _enough([0.1] * 12, cfg, now) is None  # 1.2 ms measured, under min_time_ms
    assert _enough(tight, cfg, now) == "ci"  # enough samples and time, CI of the median within 1%
    spread = [1.0 + (i % 7) for i in range(20)]
    assert _enough(spread, cfg, now) is None  # CI far wider than 1%: sample more
    assert _enough(spread * 3, cfg, now) == "max_samples"
    assert _enough(spread, cfg, now - 200) == "max_time"


def test_stopping_rule_stops_on_a_steady_workload():
    cfg = TimingConfig(warmup_min_ms=5, min_samples=10, min_time_ms=10, max_time_s=5, rel_ci_target=0.05)
    t = time_call(work, "cpu", cfg)
    assert t.n >= 10 and sum(t.samples_ms) >= 10
    assert t.stopped_by in ("ci", "max_time")  # a CPU workload stops by the CI, or by the cap on a noisy machine


def test_stopping_rule_respects_max_time_on_noise():
    calls = iter(range(10**9))

    def noisy():
        time.sleep(0.001 * (1 + (next(calls) % 7)))  # spread far above the 0.1% target

    cfg = TimingConfig(warmup_min_ms=5, warmup_max_ms=50, min_samples=10, min_time_ms=5, max_time_s=0.5,
                       rel_ci_target=0.001)
    t0 = time.perf_counter()
    t = time_call(noisy, "cpu", cfg)
    assert time.perf_counter() - t0 < 3
    assert t.stopped_by == "max_time"
    assert t.n >= 10


def test_warmup_excludes_slow_first_call():
    """The first call (a compile or autotune, 500 ms here) is reported apart and is in no sample. The bound on the
    samples sits well under it but far over the host's hiccups: on a shared 2-core machine under `pytest -n 2`
    one 1 ms sleep of 200 took 100 ms (2026-12-01)."""
    state = {"first": True}

    def fn():
        if state["first"]:
            state["first"] = False
            time.sleep(0.5)
        else:
            time.sleep(0.001)

    t = time_call(fn, "cpu", TimingConfig.quick())
    assert t.first_call_ms >= 500
    assert max(t.samples_ms) < 400
    assert statistics.median(t.samples_ms) < 20


def test_median_ci_contains_median():
    samples = [1.0 + 0.01 * (i % 10) for i in range(100)]
    lo, hi = median_ci(samples)
    assert lo <= statistics.median(samples) <= hi


def test_on_time_drops_samples_the_host_was_late_for():
    # (event ms, issue ms): the second call took the host longer than the spin held the stream
    kept, dropped, hold = timing.on_time([(0.020, 0.10), (0.240, 0.60), (0.021, 0.20)], hold_ms=0.5)
    assert kept == [0.020, 0.021] and dropped == [0.240]
    assert hold == 0.5  # the batch's median issue time (0.2 ms) x 1.5 is shorter than the hold: unchanged
    # every call late: nothing kept, and the hold grows past the calls' issue time
    kept, dropped, hold = timing.on_time([(1.0, 1.0), (1.1, 2.0), (1.2, 3.0)], hold_ms=0.5)
    assert kept == [] and dropped == [1.0, 1.1, 1.2] and hold == 3.0
    # issue within the hold but past four fifths of it: late (the spin's clock may have sped up)
    kept, dropped, hold = timing.on_time([(0.02, 0.45)], hold_ms=0.5)
    assert kept == [] and dropped == [0.02]
    kept, dropped, hold = timing.on_time([(0.02, 0.1)], hold_ms=0.5)
    assert kept == [0.02] and dropped == [] and hold == 0.5


class _FakeGPU:
    """A virtual host clock and one in-order stream: an op issued at host time t starts at max(t, when the stream
    is free). Enough of torch.cuda for bench.timing.time_cuda to run on a CPU."""

    CYCLES_PER_MS = 1e6

    def __init__(self):
        self.now = 0.0  # host clock, ms
        self.free = 0.0  # when the stream has finished everything issued so far, ms

    def perf_counter(self):
        self.now += 0.001  # every clock read costs the host a microsecond
        return self.now / 1e3

    def kernel(self, ms):
        self.free = max(self.now, self.free) + ms

    def sleep_cycles(self, cycles):
        self.kernel(cycles / self.CYCLES_PER_MS)

    def event(self, enable_timing=True):
        gpu, ev = self, types.SimpleNamespace(at=None)
        ev.record = lambda: setattr(ev, "at", max(gpu.now, gpu.free))
        ev.synchronize = lambda: setattr(gpu, "now", max(gpu.now, ev.at))
        ev.elapsed_time = lambda other: other.at - ev.at
        return ev

    def synchronize(self):
        self.now = max(self.now, self.free)


@pytest.fixture
def gpu(monkeypatch):
    """bench.timing on the simulated stream (no L2 to flush)."""
    gpu = _FakeGPU()
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=gpu.perf_counter))
    monkeypatch.setattr(timing, "_CYCLES_PER_MS", [gpu.CYCLES_PER_MS])
    monkeypatch.setattr(timing, "l2_flusher", lambda device: (lambda: None))
    import torch

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", gpu.synchronize)
    monkeypatch.setattr(torch.cuda, "Event", gpu.event)
    monkeypatch.setattr(torch.cuda, "_sleep", gpu.sleep_cycles)
    return gpu


def stalling_call(gpu):
    """A call that takes the host 0.3 ms to issue and the device 0.02 ms to run; one call in ten the host stalls
    2 ms before launching."""
    calls = []

    def fn():
        calls.append(1)
        gpu.now += 2.0 if len(calls) % 10 == 0 else 0.3  # host: Python, launch overhead, now and then a stall
        gpu.kernel(0.02)

    return fn


def test_cuda_timer_drops_samples_the_host_was_late_for(gpu):
    """On the simulated stream (stalling_call), events around a call would time the host's 0.3 ms, or the
    stall; the timer keeps only calls issued while the spin kernel still held the stream, so every sample reads
    0.02 ms."""
    cfg = TimingConfig(flush_l2=False, cuda_graph="never", max_samples=200, warmup_min_ms=5, min_time_ms=1)
    t = timing.time_cuda(stalling_call(gpu), cfg)
    assert t.method == "cuda_event" and t.n >= 10
    assert all(abs(x - 0.02) < 1e-6 for x in t.samples_ms), sorted(t.samples_ms)[-5:]
    assert t.extra["late_samples"] >= 1  # the stalled calls were seen and dropped
    assert t.extra["launch_bound"]  # 0.3 ms of host time a call against 0.02 of device time


def test_autotune_bench_times_the_device_not_the_host(gpu):
    """The autotuner's benchmark on the same simulated call reads the device's 0.02 ms, median and quantiles
    (triton.testing.do_bench, its events around the call as the host issues it, would read about 0.3)."""
    assert timing.autotune_bench(stalling_call(gpu)) == pytest.approx(0.02)
    assert timing.autotune_bench(stalling_call(gpu), quantiles=(0.5, 0.2, 0.8)) == pytest.approx([0.02] * 3)


def test_ranked_timer_runs_every_call_in_its_range():
    """Multi-rank calls carry the names of `bench run`'s others (collectives and data-parallel steps were timed
    outside any range, so nsys and ncu could not find them): the first call and the warmup calls as warmup, each
    sample as timed. One gloo rank in this process."""
    from contextlib import contextmanager

    import torch.distributed as dist

    phases = []

    @contextmanager
    def call_range(phase):
        phases.append(phase)
        yield

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = timing.time_ranked(work, "cpu", TimingConfig(min_samples=4, max_samples=4, min_time_ms=0.0),
                               call_range, warmup=2)
    finally:
        dist.destroy_process_group()
    assert phases == ["warmup"] * 3 + ["timed"] * 4
    assert len(t.samples_ms) == 4 and t.warmup_calls == 2
