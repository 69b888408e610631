"""bench compare: A/A false-positive rate, real slowdowns caught, small ones and noise not called regressions."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import compare, results

ROOT = Path(__file__).parent.parent


def row(impl, samples, status="ok", point=None):
    return {"component": "rmsnorm", "impl": impl, "mode": "fwd", "point": point or {"tokens": 8, "dim": 8},
            "dtype": "fp32", "device": "cpu:test", "status": status, "reason": "" if status == "ok" else "boom",
            "samples_ms": list(map(float, samples)), "median_ms": float(np.median(samples)) if len(samples) else None,
            "run_id": "r", "suite": "s"}


def draw(rng, median=1.0, spread=0.02, n=50):
    """Timing-like samples: lognormal around the median with a few slow outliers."""
    s = median * rng.lognormal(0, spread, n)
    s[rng.random(n) < 0.05] *= 1.3
    return s


def write(path, rows):
    with results.Writer(path) as w:
        for r in rows:
            w.write(r)
    return path


def verdicts(tmp_path, base_rows, cur_rows, **kw):
    b = write(tmp_path / "b.jsonl", base_rows)
    c = write(tmp_path / "c.jsonl", cur_rows)
    return {v.impl: v for v in compare.compare_files([b], [c], **kw)}


def test_aa_false_positive_rate_is_low():
    """2000 pairs from the same noisy distribution (4% lognormal spread, 5% outliers 30% slow, 20 samples):
    state the rate of false regressions."""
    rng = np.random.default_rng(0)
    calls = {"slower": 0, "faster": 0, "noisy": 0, "same": 0}
    for _ in range(2000):
        v, _ = compare.judge_pair(list(draw(rng, spread=0.04, n=20)), list(draw(rng, spread=0.04, n=20)),
                                  threshold=0.05, alpha=0.01)
        calls[v] += 1
    rate = calls["slower"] / 2000
    print(f"A/A over 2000 pairs: {calls}; false regression rate {rate:.4f}")
    assert rate < 0.005
    assert calls["faster"] / 2000 < 0.005


def test_twenty_percent_slowdown_caught_two_percent_not(tmp_path):
    rng = np.random.default_rng(1)
    base = [row("a", draw(rng)), row("b", draw(rng)), row("c", draw(rng))]
    cur = [row("a", draw(rng, 1.20)), row("b", draw(rng, 1.02)), row("c", draw(rng, 0.80))]
    got = verdicts(tmp_path, base, cur)
    assert got["a"].verdict == "slower" and got["a"].ratio == pytest.approx(1.2, rel=0.03)
    assert got["b"].verdict == "same"
    assert got["c"].verdict == "faster"
    assert compare.failed(list(got.values()))


def test_noisy_row_is_called_noisy(tmp_path):
    rng = np.random.default_rng(2)
    base = [row("a", draw(rng, spread=0.6, n=12))]
    cur = [row("a", draw(rng, 1.10, spread=0.6, n=12))]
    got = verdicts(tmp_path, base, cur)
    assert got["a"].verdict == "noisy"
    assert not compare.failed(list(got.values()))


def test_a_median_of_zero_is_not_timed_rather_than_a_division_by_zero(tmp_path):
    rng = np.random.default_rng(3)
    got = verdicts(tmp_path, [row("a", [0.0] * 5), row("b", draw(rng))], [row("a", [0.0] * 5), row("b", [0.0] * 5)])
    assert got["a"].verdict == got["b"].verdict == "not-timed" and "median of 0 ms" in got["a"].note


def test_correctness_regression_fails_even_when_faster(tmp_path):
    rng = np.random.default_rng(3)
    base = [row("a", draw(rng))]
    cur = [row("a", draw(rng, 0.5), status="mismatch")]
    got = verdicts(tmp_path, base, cur)
    assert got["a"].verdict == "broken"
    assert compare.failed(list(got.values()))


def test_new_and_missing_rows_are_listed(tmp_path):
    rng = np.random.default_rng(4)
    got = verdicts(tmp_path, [row("old", draw(rng))], [row("new", draw(rng))])
    assert got["old"].verdict == "missing" and got["new"].verdict == "new"
    assert not compare.failed(list(got.values()))


def bench(*args):
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_cli_exit_codes_and_formats(tmp_path):
    rng = np.random.default_rng(5)
    b = write(tmp_path / "b.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    same = write(tmp_path / "same.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    slow = write(tmp_path / "slow.jsonl", [row("a", draw(rng, 1.3)), row("b", draw(rng))])
    ok = bench("compare", str(b), str(same))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = bench("compare", str(b), str(slow), "--format", "markdown")
    assert bad.returncode == 1
    assert "**Regression**" in bad.stdout and "| slower | rmsnorm:a |" in bad.stdout
    js = bench("compare", str(b), str(slow), "--format", "json", "--threshold", "50%")
    assert js.returncode == 0  # a 30% slowdown is under a 50% threshold
    assert json.loads(js.stdout)["failed"] is False
    assert bench("compare", str(b), str(tmp_path / "nope.jsonl")).returncode == 2
    assert bench("compare", str(b), str(same), "--threshold", "abc").returncode == 2


def test_a_file_without_result_rows_is_an_error_not_a_passing_gate(tmp_path):
    """An explore script's rows, a pytest-benchmark JSON or an empty file, on either side: exit 2 naming the file
    (such a file once compared as `1 same`, exit 0, and made a report of nothing). Rows that are not result rows
    among real ones are skipped, each named on stderr, and the real ones are compared."""
    rng = np.random.default_rng(6)
    b = write(tmp_path / "b.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    explore = tmp_path / "explore.jsonl"
    explore.write_text(json.dumps({"variant": "desc", "us": 1.0}) + "\n")
    pytest_benchmark = tmp_path / "pb.json"
    pytest_benchmark.write_text(json.dumps({"benchmarks": [], "machine_info": {}}))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for wrong in (explore, pytest_benchmark, empty):
        for args in ((b, wrong), (wrong, b)):
            proc = bench("compare", *map(str, args))
            assert proc.returncode == 2 and f"{wrong} holds no result rows" in proc.stderr, proc.stdout + proc.stderr
    for cmd in ("report", "export"):  # nor an empty report or export of it
        proc = bench(cmd, str(explore), "-o", str(tmp_path / cmd))
        assert proc.returncode == 2 and f"{explore} holds no result rows" in proc.stderr, proc.stdout + proc.stderr
        assert not (tmp_path / cmd).exists()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(b.read_text() + json.dumps({"variant": "desc"}) + "\n")
    proc = bench("compare", str(b), str(mixed), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert [v["verdict"] for v in json.loads(proc.stdout)["rows"]] == ["same", "same"]
    assert proc.stderr.strip() == (f"warning: {mixed}:3: not a result row, skipped "
                                   f"(no component, impl, mode, point, dtype, status)")


def test_files_with_no_case_in_common_are_an_error_naming_the_devices(tmp_path):
    """A baseline of another machine (an H200's file against a CPU run) shares no case: every row would be `new` or
    `missing`, and such a gate once passed with `No regression`. One case in common is enough to compare;
    `--across-devices` matches two machines' rows, one device a side."""
    rng = np.random.default_rng(7)
    gpu = write(tmp_path / "gpu.jsonl", [dict(row("a", draw(rng)), device="NVIDIA H200")])
    cpu = write(tmp_path / "cpu.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    proc = bench("compare", str(gpu), str(cpu))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"no case of {cpu} is in {gpu}: the baseline ran on NVIDIA H200; the current results on cpu:test "
            "(--across-devices compares two machines)" in proc.stderr)
    proc = bench("compare", str(gpu), str(cpu), "--across-devices", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["rows"]
    assert {(v["impl"], v["verdict"], v["device"]) for v in got} == {("a", "same", "NVIDIA H200 -> cpu:test"),
                                                                     ("b", "new", "NVIDIA H200 -> cpu:test")}
    md = bench("compare", str(gpu), str(cpu), "--across-devices", "--format", "markdown").stdout.splitlines()
    assert md[0].startswith("**No regression**") and md[2] == "across devices: NVIDIA H200 -> cpu:test"
    both = write(tmp_path / "both.jsonl", [dict(row("a", draw(rng)), device="NVIDIA H200"), row("b", draw(rng))])
    proc = bench("compare", str(both), str(cpu), "--across-devices")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("--across-devices matches one device against one; the baseline holds NVIDIA H200, cpu:test"
            in proc.stderr)
    other = write(tmp_path / "other.jsonl", [row("c", draw(rng))])
    proc = bench("compare", str(cpu), str(other))
    assert proc.returncode == 2 and "they share no component, implementation" in proc.stderr, proc.stderr
    partial = write(tmp_path / "partial.jsonl", [row("a", draw(rng)), row("c", draw(rng))])
    proc = bench("compare", str(cpu), str(partial), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"] == {"same": 1, "missing": 1, "new": 1}


def test_all_lists_unchanged_rows_in_every_format(tmp_path):
    """Without --all the table and the markdown list only the rows that changed; with it, every row (the markdown
    ignored --all until session 38)."""
    rng = np.random.default_rng(11)
    b = write(tmp_path / "b.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    slow = write(tmp_path / "slow.jsonl", [row("a", draw(rng, 1.3)), row("b", draw(rng))])
    for fmt, same_row in (("markdown", "| same | rmsnorm:b |"), ("table", "same")):
        short = bench("compare", str(b), str(slow), "--format", fmt)
        every = bench("compare", str(b), str(slow), "--format", fmt, "--all")
        assert short.returncode == every.returncode == 1, fmt
        assert "rmsnorm:a" in short.stdout and "rmsnorm:b" not in short.stdout, fmt
        assert "rmsnorm:a" in every.stdout and "rmsnorm:b" in every.stdout and same_row in every.stdout, fmt


def test_cases_missing_from_a_partial_run_are_counted_not_listed(tmp_path):
    """A run of part of a suite against the whole suite's baseline: its verdicts come first and alone, the cases it
    did not run are one line (listed with --all), in the table and the markdown."""
    rng = np.random.default_rng(12)
    b = write(tmp_path / "b.jsonl", [row(name, draw(rng)) for name in ("a", "gone1", "gone2", "gone3")])
    part = write(tmp_path / "part.jsonl", [row("a", draw(rng, 1.3))])
    for fmt in ("table", "markdown"):
        short = bench("compare", str(b), str(part), "--format", fmt)
        every = bench("compare", str(b), str(part), "--format", fmt, "--all")
        assert short.returncode == every.returncode == 1, fmt  # the slower row still fails
        assert "rmsnorm:a" in short.stdout and "gone" not in short.stdout, fmt
        assert "3 cases of the baseline are not in the current results (--all lists them)" in short.stdout, fmt
        assert all(f"rmsnorm:gone{i}" in every.stdout for i in (1, 2, 3)), fmt
        assert "--all lists them" not in every.stdout, fmt


def test_fail_on_broken_gates_correctness_only(tmp_path):
    """--fail-on broken (for machines whose timing cannot be trusted): a 30% slowdown is listed but exits 0, a
    correctness loss still exits 1; the default fails on both."""
    rng = np.random.default_rng(7)
    b = write(tmp_path / "b.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    slow = write(tmp_path / "slow.jsonl", [row("a", draw(rng, 1.3)), row("b", draw(rng))])
    broke = write(tmp_path / "broke.jsonl", [row("a", draw(rng)), row("b", draw(rng), status="mismatch")])
    listed = bench("compare", str(b), str(slow), "--fail-on", "broken", "--format", "markdown")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "**No regression**" in listed.stdout and "timing not gated" in listed.stdout
    assert "| slower | rmsnorm:a |" in listed.stdout
    assert bench("compare", str(b), str(slow)).returncode == 1
    for gate in ("broken", "slower"):
        js = bench("compare", str(b), str(broke), "--fail-on", gate, "--format", "json")
        assert js.returncode == 1 and json.loads(js.stdout)["failed"] is True, gate
    table = bench("compare", str(b), str(broke), "--fail-on", "broken")
    assert table.returncode == 1 and "broken rows above" in table.stderr


def test_export_loads_in_pytest_benchmark_compare(tmp_path):
    rng = np.random.default_rng(6)
    src = write(tmp_path / "r.jsonl", [row("a", draw(rng)), row("b", draw(rng)), row("c", [], status="error")])
    out = tmp_path / "0001_export.json"
    proc = bench("export", "--format", "pytest-benchmark", str(src), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert len(data["benchmarks"]) == 2  # the error row has no samples
    assert data["benchmarks"][0]["stats"]["median"] == pytest.approx(np.median(draw(np.random.default_rng(6))) / 1e3, rel=0.5)
    # pytest-benchmark's own compare command reads it.
    tool = Path(sys.executable).parent / "pytest-benchmark"
    cmp = subprocess.run([str(tool), "compare", str(out)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert "rmsnorm[a-fwd-fp32-tokens=8,dim=8]" in cmp.stdout


def test_note_names_what_the_autotuner_chose_differently(tmp_path):
    """A timed pair whose rows name different autotuner configs says which settings moved; an option added since
    (absent on the base side) counts only where it is on; unchanged configs, and kernels on one side only, say
    nothing."""
    rng = np.random.default_rng(3)
    b_cfg = {"_k": "ROWS=4 STAGES=3 warps=4 stages=3", "_old": "BM=64 warps=4"}
    base = [dict(row(i, draw(rng)), kernel_configs=b_cfg) for i in "abc"]
    cur = [dict(row("a", draw(rng, 1.3)), kernel_configs={"_k": "ROWS=4 STAGES=3 SPLIT=False warps=8 stages=3"}),
           dict(row("b", draw(rng)), kernel_configs={"_k": "ROWS=4 STAGES=3 SPLIT=True warps=4 stages=3"}),
           dict(row("c", draw(rng)), kernel_configs=b_cfg)]
    v = verdicts(tmp_path, base, cur)
    assert v["a"].verdict == "slower" and v["a"].note == "autotuner: _k warps 4->8"
    assert v["b"].note == "autotuner: _k SPLIT none->True"
    assert v["c"].note == ""


def test_note_names_a_moved_copy_probe_on_memory_bound_rows(tmp_path):
    """Where the two runs' copy probes differ by 2% or more, a memory-bound row says by how much; a compute-bound
    row, a probe that moved less, and a side without one say nothing."""
    rng = np.random.default_rng(4)
    probe = lambda us: {"env": {"copy_probe": {"mib": 32, "us": us, "gbps": 3500.0}}}  # noqa: E731
    base = [dict(row(i, draw(rng)), bound=bound, **probe(18.9)) for i, bound in
            (("mem", "memory"), ("cmp", "compute"), ("small", "memory"), ("none", "memory"))]
    cur = [dict(row("mem", draw(rng, 1.08)), bound="memory", **probe(20.4)),
           dict(row("cmp", draw(rng, 1.08)), bound="compute", **probe(20.4)),
           dict(row("small", draw(rng)), bound="memory", **probe(19.1)),
           dict(row("none", draw(rng)), bound="memory")]
    v = verdicts(tmp_path, base, cur)
    assert v["mem"].note == "copy probe 18.9->20.4 us (+8%)"
    assert v["cmp"].note == "" and v["small"].note == "" and v["none"].note == ""
    both = compare.probe_change(dict(bound="memory", **probe(20.0)), dict(bound="memory", **probe(18.0)))
    assert both == "copy probe 20->18 us (-10%)"


def test_note_names_a_changed_l2_flush(tmp_path):
    """A row timed after another flush than its baseline says so; a flushed row from before rows recorded the flush
    counts as zeroing alone, and unflushed rows (CPU) on both sides say nothing."""
    rng = np.random.default_rng(5)
    flushed = lambda **kw: {"l2_flushed": True, **kw}  # noqa: E731
    base = [dict(row("old", draw(rng)), **flushed()), dict(row("same", draw(rng)), **flushed(l2_flush="reset")),
            dict(row("cpu", draw(rng)), l2_flushed=False), dict(row("off", draw(rng)), **flushed(l2_flush="reset"))]
    cur = [dict(row("old", draw(rng)), **flushed(l2_flush="reset")),
           dict(row("same", draw(rng)), **flushed(l2_flush="reset")),
           dict(row("cpu", draw(rng)), l2_flushed=False), dict(row("off", draw(rng)), l2_flushed=False)]
    v = verdicts(tmp_path, base, cur)
    assert v["old"].note == "L2 flush zero->reset"
    assert v["same"].note == "" and v["cpu"].note == ""
    assert v["off"].note == "L2 flush reset->none"


def test_note_names_a_changed_timer(tmp_path):
    """A row timed by another timer than its baseline (a CUDA graph against events) says so; the same timer, or a
    side that does not name one, says nothing."""
    rng = np.random.default_rng(8)
    base = [dict(row("graph", draw(rng)), timer="cuda_graph"), dict(row("same", draw(rng)), timer="cuda_event"),
            row("old", draw(rng))]
    cur = [dict(row(i, draw(rng)), timer="cuda_event") for i in ("graph", "same", "old")]
    v = verdicts(tmp_path, base, cur)
    assert v["graph"].note == "timer cuda_graph->cuda_event"
    assert v["same"].note == "" and v["old"].note == ""


def test_a_gzipped_baseline_compares_as_the_plain_file(tmp_path):
    """Old baselines are kept gzipped (baselines/h200/s13..s29): `bench compare` reads `.jsonl.gz` as it reads
    `.jsonl`, and finds the same slowdown."""
    import gzip
    import shutil

    rng = np.random.default_rng(7)
    b = write(tmp_path / "b.jsonl", [row("a", draw(rng)), row("b", draw(rng))])
    slow = write(tmp_path / "slow.jsonl", [row("a", draw(rng, 1.3)), row("b", draw(rng))])
    with open(b, "rb") as src, gzip.open(tmp_path / "b.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain = {v.impl: (v.verdict, v.ratio) for v in compare.compare_files([b], [slow])}
    zipped = {v.impl: (v.verdict, v.ratio) for v in compare.compare_files([tmp_path / "b.jsonl.gz"], [slow])}
    assert zipped == plain and plain["a"][0] == "slower" and plain["b"][0] == "same"
    cli = bench("compare", str(tmp_path / "b.jsonl.gz"), str(slow), "--format", "markdown")
    assert cli.returncode == 1 and "| slower | rmsnorm:a |" in cli.stdout, cli.stdout + cli.stderr
