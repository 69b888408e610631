"""What a measured row records about the run itself: here, the config each autotuned Triton kernel ran with."""
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
