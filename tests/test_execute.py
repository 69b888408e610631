"""What a measured row records about the run itself: here, the config each autotuned Triton kernel ran with."""
import pytest
import torch

from bench.execute import Case, Worker
from bench.timing import TimingConfig


def test_rows_name_the_autotuned_config_each_kernel_ran_with():
    """A fwd_bwd case names the forward and backward kernels' configs; a fwd case after it only the forward's (the
    backward's record from the case before is cleared); an eager case none."""
    worker = Worker("cpu", TimingConfig.quick())
    point = {"tokens": 7, "dim": 45}
    both = worker.measure(Case("rmsnorm", "triton", "fwd_bwd", point, "fp32"))
    assert both["status"] == "ok"
    assert set(both["kernel_configs"]) == {"_rmsnorm_fwd_kernel", "_rmsnorm_bwd_kernel"}
    assert "ROWS=" in both["kernel_configs"]["_rmsnorm_fwd_kernel"] and "warps=" in both["kernel_configs"]["_rmsnorm_fwd_kernel"]
    fwd = worker.measure(Case("rmsnorm", "triton", "fwd", point, "fp32"))
    assert set(fwd["kernel_configs"]) == {"_rmsnorm_fwd_kernel"}
    eager = worker.measure(Case("rmsnorm", "eager", "fwd", point, "fp32"))
    assert eager["status"] == "ok" and "kernel_configs" not in eager
    assert "autotune_ms" not in both  # the interpreter's autotuners have one config: nothing benchmarked


def test_rows_carry_the_timings_the_autotuner_chose_by():
    """Where an autotuner benchmarked its candidates in a case, the row has its median of each, fastest first;
    the next case, taking the pick from the autotuner's cache, has the pick and no timings."""
    import triton

    from bench import execute
    from kernels import rmsnorm as R

    tuner = R._rmsnorm_fwd_kernel
    four, eight = (triton.Config({"ROWS": 4, "STAGES": 1}, num_warps=w) for w in (4, 8))
    execute.forget_autotune_choices()
    assert execute.autotune_choices() == {}
    tuner.best_config, tuner.configs_timings = eight, {four: [0.0226, 0.0220, 0.0231], eight: [0.0186, 0.018, 0.019]}
    got = execute.autotune_choices()
    assert got["kernel_configs"] == {"_rmsnorm_fwd_kernel": "ROWS=4 STAGES=1 warps=8 stages=3"}
    assert list(got["autotune_ms"]["_rmsnorm_fwd_kernel"].items()) == [
        ("ROWS=4 STAGES=1 warps=8 stages=3", 0.0186), ("ROWS=4 STAGES=1 warps=4 stages=3", 0.0226)]
    execute.forget_autotune_choices()
    tuner.best_config = four  # a cached pick: run() sets best_config without benchmarking
    assert execute.autotune_choices() == {"kernel_configs": {"_rmsnorm_fwd_kernel": "ROWS=4 STAGES=1 warps=4 stages=3"}}
    execute.forget_autotune_choices()


def test_timed_rows_name_only_the_kernels_their_timed_calls_ran(monkeypatch):
    """A bwd case runs the forward once to build the graph it differentiates, then times the backward alone: its
    row names the backward kernel's config, not the forward's (whose change `bench compare` would otherwise name
    as a cause of a slower backward); a fwd_bwd row names both. Here the Triton rmsnorm is timed through the
    interpreter as if it were not (on CPU a Triton row is otherwise left untimed, its configs those of the check)."""
    from bench import registry

    monkeypatch.setattr(registry.Impl, "interpreted_on_cpu", property(lambda self: False))
    worker = Worker("cpu", TimingConfig.quick())
    point = {"tokens": 7, "dim": 45}
    bwd = worker.measure(Case("rmsnorm", "triton", "bwd", point, "fp32"))
    assert bwd["status"] == "ok" and bwd["median_ms"] > 0
    assert set(bwd["kernel_configs"]) == {"_rmsnorm_bwd_kernel"}
    both = worker.measure(Case("rmsnorm", "triton", "fwd_bwd", point, "fp32"))
    assert set(both["kernel_configs"]) == {"_rmsnorm_fwd_kernel", "_rmsnorm_bwd_kernel"}


def test_impls_that_write_into_out_are_timed_without_a_check():
    """`bench run --no-check` computes no reference, which is where a `writes_out` impl's output shapes came from:
    its fwd rows were errors (matmul's eager: "argument 'out' must be Tensor, not tuple"). Now one call without
    `out` gives the shapes, and the timed calls write into a buffer of them."""
    for check in (False, True):
        row = Worker("cpu", TimingConfig.quick(), check=check).measure(
            Case("matmul", "eager", "fwd", {"m": 33, "n": 17, "k": 9}, "fp32"))
        assert row["status"] == "ok", row.get("reason")
        assert row["median_ms"] > 0 and ("rel_err" in row) == check


def test_a_gpu_worker_has_the_kernels_autotuners_time_with_the_suites_timer(monkeypatch):
    """kernels/ cannot import bench: a worker on a GPU installs bench.timing.autotune_bench as the autotuners'
    benchmark (quick_bench then calls it); a CPU worker (the interpreter: no tuning) leaves do_bench in place."""
    from bench import timing
    from kernels import _autotune

    monkeypatch.setattr(_autotune, "_benchmark", None)
    Worker("cpu", TimingConfig.quick())
    assert _autotune._benchmark is None
    Worker("cuda", TimingConfig.quick())
    assert _autotune._benchmark is timing.autotune_bench
    seen = []
    monkeypatch.setattr(_autotune, "_benchmark", lambda fn, quantiles=None: seen.append(quantiles) or [1.0, 0.9, 1.1])
    assert _autotune.quick_bench(lambda: None, quantiles=(0.5, 0.2, 0.8)) == [1.0, 0.9, 1.1]
    assert seen == [(0.5, 0.2, 0.8)]


def test_the_allocators_cache_is_returned_at_a_new_point_not_between_implementations(monkeypatch):
    """Memory returned to the driver and allocated again ran slow for its first ~50 ms on an H200, when a Triton
    case autotunes: a worker keeps the allocator's cache between the implementations of one point (which also
    share its reference) and returns it when the point changes, or after a case that failed."""
    from bench import check

    released, references = [], []
    monkeypatch.setattr(Worker, "_release", lambda self: released.append(len(references)))
    real = check.Reference.__init__
    monkeypatch.setattr(check.Reference, "__init__", lambda self, *a, **k: references.append(1) or real(self, *a, **k))
    worker = Worker("cpu", TimingConfig.quick())
    one, two = {"tokens": 7, "dim": 45}, {"tokens": 9, "dim": 45}
    for impl in ("eager", "builtin"):
        assert worker.measure(Case("rmsnorm", impl, "fwd", one, "fp32"))["status"] == "ok"
    assert (released, len(references)) == ([0], 1)  # once, on entering the point, before its reference
    assert worker.measure(Case("rmsnorm", "eager", "fwd", two, "fp32"))["status"] == "ok"
    assert (released, len(references)) == ([0, 1], 2)
    assert worker.measure(Case("rmsnorm", "eager", "fwd", two, "bf16"))["status"] == "ok"  # another dtype
    assert released == [0, 1, 2]

    def failing(self, *args, **kwargs):
        raise RuntimeError("reference failed")

    monkeypatch.setattr(check.Reference, "__init__", failing)
    assert worker.measure(Case("rmsnorm", "eager", "fwd", one, "fp32"))["status"] == "error"
    assert released == [0, 1, 2, 3, 3]  # entering the point, then after the failed case


def test_returning_memory_waits_while_the_driver_clears_it(monkeypatch):
    """The driver clears memory returned to it in the background, slowing what runs meanwhile (H200: 24 GiB,
    ~60 ms): the worker sleeps in proportion to what it returned, and not at all when nothing was cached."""
    from bench import execute

    reserved = [30 * 2**30]
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a, **k: reserved[0])
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: reserved.__setitem__(0, 6 * 2**30))
    slept = []
    monkeypatch.setattr(execute.time, "sleep", slept.append)
    worker = Worker("cpu", TimingConfig.quick())
    worker.device = "cuda"  # only _release runs: no CUDA call beyond the two faked ones
    worker._release()
    assert slept == [pytest.approx(24 * execute.CLEAR_MS_PER_GIB / 1e3)]
    worker._release()  # 6 GiB stay reserved (in use): nothing returned, no wait
    assert len(slept) == 1


def test_backward_calls_carry_their_ranges_where_autograd_runs_them(monkeypatch):
    """The timed bwd and fwd_bwd calls, and the check's, run their backward inside profiling.backward_in_ranges
    (which gives autograd's worker thread the call's NVTX ranges) and where autograd runs it: its worker threads
    stay on, as in training (session 57 had turned them off for the call; a host-bound step then read faster)."""
    from contextlib import contextmanager

    from bench import check, execute, profiling, registry

    seen, entered = [], []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(torch.autograd.is_multithreading_enabled())
            return g * 2

    real = profiling.backward_in_ranges

    @contextmanager
    def recording(outputs):
        entered.append(len(outputs))
        with real(outputs):
            yield

    monkeypatch.setattr(profiling, "backward_in_ranges", recording)
    monkeypatch.setattr(check, "backward_in_ranges", recording)
    comp = registry.get("rmsnorm")
    impl = registry.Impl("rmsnorm", "probe", build=None, needs=registry.Needs(), description="a probe")
    inputs = comp.make_inputs({"tokens": 3, "dim": 5}, torch.float32, "cpu", 0)
    fn = lambda x, w: Probe.apply(x) * w  # noqa: E731
    for mode in ("bwd", "fwd_bwd"):
        execute.make_timed_call(impl, fn, comp, mode, inputs, "cpu", 0, ())()
    check.run_for_check(impl, fn, comp, "fwd_bwd", inputs, "cpu", 0, ())
    assert seen == [True, True, True]
    assert entered == [1, 1, 1]
