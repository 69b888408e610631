"""The run's copy probe: measured by the worker, recorded in every row's env, and a failed one does not stop the
run."""
from bench import calibrate, runner
from bench.timing import TimingConfig


def test_copy_probe_times_a_copy_and_counts_both_directions():
    probe = calibrate.copy_probe("cpu", TimingConfig.quick(), mib=1)
    assert probe["mib"] == 1 and probe["us"] > 0
    assert abs(probe["gbps"] - 2 * 2**20 / (probe["us"] * 1e-6) / 1e9) <= 0.06 + 1e-3 * probe["gbps"]


class _FakeWorker:
    def __init__(self, answer):
        self.answer, self.sent = answer, []
        self.conn = self

    def send(self, msg):
        self.sent.append(msg)

    def recv(self, timeout):
        return self.answer


def _runner(tmp_path, logs):
    r = runner.Runner(runner.RunOptions(device="cuda", out=tmp_path / "r.jsonl"), log=logs.append)
    r.env = {"gpu": "test"}
    return r


def test_runner_records_the_probe_in_its_env_and_logs_it(tmp_path):
    logs = []
    r = _runner(tmp_path, logs)
    worker = _FakeWorker(("probe", {"mib": 32, "us": 18.9, "gbps": 3550.6}))
    r._probe(worker)
    assert worker.sent == [("probe",)]
    assert r.env == {"gpu": "test", "copy_probe": {"mib": 32, "us": 18.9, "gbps": 3550.6}}
    assert logs == ["copy probe: 32 MiB into 32 MiB in 18.90 us (3,551 GB/s)"]


def test_a_probe_that_fails_is_recorded_as_such_and_the_run_goes_on(tmp_path):
    for answer, why in ((("dead",), "no answer from the worker"), (None, "no answer from the worker"),
                        (("probe", {"error": "OutOfMemoryError: boom"}), "OutOfMemoryError: boom")):
        logs = []
        r = _runner(tmp_path, logs)
        r._probe(_FakeWorker(answer))
        assert r.env["copy_probe"] == {"error": why}
        assert logs == [f"copy probe failed: {why}"]


def test_the_worker_answers_a_probe_request():
    """A real worker process (CPU) measures the probe when asked."""
    handle = runner._WorkerHandle(runner.RunOptions(device="cpu", out=None, timing=TimingConfig.quick()))
    try:
        handle.conn.send(("probe",))
        msg = handle.recv(120)
    finally:
        handle.stop()
    assert msg[0] == "probe" and msg[1]["mib"] == calibrate.PROBE_MIB and msg[1]["us"] > 0
