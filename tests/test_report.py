"""The HTML report: sections, charts and tables from fixture rows; escaping; and a real headless browser."""
import json
import shutil
import time
from pathlib import Path

import pytest

from bench import results
from reports.render import render

STATUSES = ["ok", "mismatch", "oom", "error", "skipped", "timeout"]


def fixture_rows(device="NVIDIA H200", backend="cuda", scale=1.0, run="run-a"):
    rows = []
    for impl, speed in (("eager", 1.0), ("triton", 0.6), ("compile", 0.8)):
        for tokens in (1024, 4096, 16384):
            med = 0.01 * tokens / 1024 * speed * scale
            flops, nbytes = 4.0 * tokens * 4096, 4.0 * tokens * 4096
            rows.append({
                "run_id": run, "time": "2026-11-29T20:00:00+00:00", "git_sha": "abc", "suite": "norms",
                "component": "rmsnorm", "impl": impl, "mode": "fwd", "point": {"tokens": tokens, "dim": 4096},
                "dtype": "bf16", "device": device, "backend": backend, "world_size": 1, "status": "ok", "reason": "",
                "samples_ms": [med * f for f in (0.99, 1.0, 1.01, 1.0, 1.02, 0.995, 1.005, 1.0, 0.99, 1.01)],
                "median_ms": med, "p20_ms": med * 0.99,
                "p80_ms": med * 1.01, "n": 10, "cpu_ms": 0.005, "flops": flops, "bytes": nbytes,
                "intensity": flops / nbytes, "predicted_ms": nbytes / 4.3e9, "bound": "memory",
                "roofline_pct": 100 * nbytes / 4.3e9 / med, "tflops": flops / med / 1e9, "gbps": nbytes / med / 1e6,
                "peak_tflops": 67.0, "peak_gbps": 4300.0, "math": "vector", "ceiling_source": "calibrated",
                "rel_err": 1e-3, "tol": 1e-2, "baseline": "eager",
                "env": {"torch": "2.11", "triton": "3.6", "gpu": device, "python": "3.12"},
            })
    for i, status in enumerate(STATUSES[1:]):
        rows.append({"run_id": run, "suite": "norms", "component": "matmul", "impl": f"bad{i}", "mode": "fwd",
                     "point": {"m": 64, "n": 64, "k": 64}, "dtype": "fp32", "device": device, "backend": backend,
                     "status": status, "reason": f"reason for {status}", "rel_err": 0.5 if status == "mismatch" else None,
                     "tol": 1e-5, "flops": 2 * 64**3, "bytes": 3 * 64 * 64 * 4, "baseline": "eager"})
    return rows


def write(path, rows):
    with results.Writer(path) as w:
        for r in rows:
            w.write(r)
    return path


def chart_data(page: str) -> str:
    """The text of the page's chart-data script element."""
    return page.split('<script id="chart-data" type="application/json">')[1].split("</script>")[0]


def charts_of(page: str) -> dict:
    return json.loads(chart_data(page))


@pytest.fixture
def report(tmp_path):
    gpu = write(tmp_path / "gpu.jsonl", fixture_rows())
    cpu = write(tmp_path / "cpu.jsonl", fixture_rows("cpu:AMD EPYC", "cpu", scale=50, run="run-c"))
    base = write(tmp_path / "base.jsonl", fixture_rows(scale=0.8))
    rows = 2 * len(fixture_rows())
    return render([str(gpu), str(cpu)], tmp_path / "out", [str(base)]), rows


def test_sections_charts_and_tables(report):
    index, n_rows = report
    page = index.read_text()
    assert (index.parent / "plotly.min.js").stat().st_size > 1_000_000  # offline: plotly.js beside the page
    assert "cdn.plot.ly" not in page and "https://" not in page.split("<body>")[1]
    for text in ("Machines", "Overview", "Comparison against baseline", "NVIDIA H200", "cpu:AMD EPYC",
                 "Roofline on NVIDIA H200", "Roofline on cpu:AMD EPYC", "source: calibrated"):
        assert text in page, text
    charts = charts_of(page)
    # rmsnorm: a roofline per device + time and speedup per (device, mode, dtype); matmul has no ok rows.
    assert len(charts) == 2 + 2 * 2
    assert page.count('data-chart="') == len(charts)
    for status in STATUSES:
        assert f"row-{status}" in page
    assert "rel err 0.5 &gt; tol 1e-05" in page  # a mismatch shows its error and tolerance
    assert "reason for oom" in page and "reason for skipped" in page
    assert page.count("<tr class=\"row-") == n_rows
    assert "Regression found" in page and "slower" in page  # current is 1/0.8 = 1.25x slower than the base


def test_a_baseline_that_shares_no_case_says_nothing_was_compared(tmp_path):
    """Another GPU's baseline: every row `new` or `missing`. The page says so, naming both devices, and does not
    call it `No regression`; with `across_devices` (`bench report --across-devices`) the two are compared."""
    gpu = write(tmp_path / "gpu.jsonl", fixture_rows())
    other = write(tmp_path / "other.jsonl", fixture_rows(device="NVIDIA H100 80GB HBM3"))
    page = render([str(gpu)], tmp_path / "out", [str(other)]).read_text()
    assert ("Nothing compared: no case is in both (the baseline ran on NVIDIA H100 80GB HBM3; the current results "
            "on NVIDIA H200)") in page
    assert "No regression" not in page and "Regression found" not in page
    page = render([str(gpu)], tmp_path / "across", [str(other)], across_devices=True).read_text()  # as asked
    assert "across devices: NVIDIA H100 80GB HBM3 -&gt; NVIDIA H200" in page and "Nothing compared" not in page
    assert page.count('class="v-row-same"') + page.count('class="v-row-noisy"') > 0


def test_collectives_get_a_bus_bandwidth_chart(tmp_path):
    rows = [{"run_id": "r", "suite": "c", "component": "collectives", "impl": "torch", "mode": "fwd",
             "point": {"op": "all_reduce", "mb": mb, "world_size": 2}, "dtype": "bf16", "device": "NVIDIA H200",
             "status": "ok", "samples_ms": [t] * 10, "median_ms": t, "p20_ms": t, "p80_ms": t, "flops": 0.0,
             "bytes": 2e6 * mb, "busbw_gbps": mb * 1.048576 / t, "peak_comm_gbps": 289.0, "baseline": "torch",
             "predicted_ms": p, "bound": bound}
            for mb, t, p, bound in ((1, 0.05, 0.04, "comm_latency"), (16, 0.1, 0.058, "comm"), (256, 0.9, 0.87, "comm"))]
    gather = [{**r, "point": {**r["point"], "op": "all_gather"}, "bound": "comm"} for r in rows]
    index = render([str(write(tmp_path / "c.jsonl", rows + gather))], tmp_path / "out")
    page = index.read_text()
    charts = charts_of(page)
    bus = [c for c in charts.values() if "Bus bandwidth" in c["layout"]["title"]["text"]]
    assert len(bus) == 1
    names = [t["name"] for t in bus[0]["data"]]
    assert "all_reduce (2 ranks, bf16)" in names
    assert "ceiling used for predictions 289 GB/s" in names  # the calibrated one the rows carry
    assert "datasheet interconnect 450 GB/s" in names  # the H200's NVLink, per direction
    (roof,) = [t for t in bus[0]["data"] if t["name"] == "all_reduce roofline"]
    # bus bytes over the predicted time: 1 MB's latency (40 us) holds it to 26 GB/s, far under the ceiling
    assert values(roof["x"]) == [1, 16, 256] and values(roof["y"]) == pytest.approx([1.048576 / 0.04, 16.777216 / 0.058,
                                                                     268.435456 / 0.87])
    assert "comm_latency-bound" in roof["text"][0] and "comm-bound" in roof["text"][1]
    assert "all_gather (2 ranks, bf16)" in names and "all_gather roofline" not in names  # the ceiling's line, all along


def test_text_from_results_is_escaped(tmp_path):
    rows = fixture_rows()
    for r in rows:
        r["suite"] = "<script>alert(1)</script>"
        r["reason"] = "</script><script>alert(2)</script>"
    r = rows[0]
    r["impl"] = "<img src=x onerror=alert(3)>"
    index = render([str(write(tmp_path / "x.jsonl", rows))], tmp_path / "out")
    page = index.read_text()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    json_part = chart_data(page)
    assert "<" not in json_part  # nothing inside the chart data can close its script element


def chromium():
    for b, d in (("/usr/bin/chromium", "/usr/bin/chromedriver"),):
        if Path(b).exists() and Path(d).exists():
            return b, d
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return shutil.which("chromium"), shutil.which("chromedriver")
    return None


@pytest.mark.slow
def test_report_in_headless_chromium(report):
    found = chromium()
    if not found:
        pytest.skip("headless Chromium not installed (apt-get install chromium chromium-driver; .ci/run does)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    index, n_rows = report
    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    opts.binary_location = found[0]
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(found[1]), options=opts)
    try:
        driver.get(index.resolve().as_uri())
        deadline = time.time() + 30
        want = driver.execute_script("return document.querySelectorAll('[data-chart]').length")
        while time.time() < deadline:
            drawn = driver.execute_script("return document.querySelectorAll('[data-chart] .main-svg').length")
            if drawn and driver.execute_script(
                    "return Array.from(document.querySelectorAll('[data-chart]')).every(e => e.querySelector('svg.main-svg'))"):
                break
            time.sleep(0.2)
        assert want == 6
        assert driver.execute_script(
            "return Array.from(document.querySelectorAll('[data-chart]')).every(e => e.querySelector('svg.main-svg'))")
        assert driver.execute_script("return document.querySelectorAll('table.results tbody tr').length") == n_rows
        # Sorting and filtering work.
        driver.execute_script("document.querySelector('table.results th:nth-child(7)').click()")
        section = driver.execute_script(
            "return Array.from(document.querySelectorAll('section.component')).find(s => s.querySelector('h2').textContent === 'rmsnorm').id")
        driver.execute_script(f"const i = document.querySelector('input.filter[data-table=\"{section}-table\"]');"
                              "i.value = 'triton'; i.dispatchEvent(new Event('input'));")
        shown = driver.execute_script(
            f"return Array.from(document.querySelectorAll('#{section}-table tbody tr')).filter(r => r.style.display !== 'none').length")
        assert shown == 2 * 3  # triton rows: two devices x three points
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        driver.quit()


def test_data_parallel_gets_a_memory_chart(tmp_path):
    rows = [{"run_id": "r", "suite": "d", "component": "data_parallel", "impl": impl, "mode": "step",
             "point": {"config": "xl", "batch": 4, "seq": 512, "world_size": 2, "bucket_mb": 25}, "dtype": "bf16",
             "device": "NVIDIA H200", "status": "ok", "samples_ms": [200.0] * 10, "median_ms": 200.0,
             "p20_ms": 200.0, "p80_ms": 200.0, "flops": 2e13, "bytes": 1e11, "baseline": "ddp",
             "peak_mem_bytes": peak * 2**30, "predicted_mem_bytes": pred * 2**30, "comm_share": share,
             "exposed_comm_share": share / 4}
            for impl, peak, pred, share in (("ddp", 45.0, 44.0, 0.375), ("fsdp2", 22.0, 20.0, 0.5))]
    page = render([str(write(tmp_path / "d.jsonl", rows))], tmp_path / "out").read_text()
    charts = charts_of(page)
    mem = [c for c in charts.values() if "Peak memory per rank" in c["layout"]["title"]["text"]]
    assert len(mem) == 1
    measured, predicted = mem[0]["data"]
    assert measured["y"] == [45.0, 22.0] and predicted["y"] == [44.0, 20.0]
    assert measured["text"][1] == "measured / predicted 1.10"
    assert "predicted MB" in page
    assert "comm % of step" in page and ">37.5%<" in page and ">12.5%<" in page  # measured communication share


def test_where_memory_runs_out_names_the_first_oom_point_per_line(tmp_path):
    """naive attention: at head_dim 16 seq 4096 runs and 16384 and 65536 run out (the first is 16384); at
    head_dim 64 seq 1024 runs and 4096 runs out; sdpa never does; an oom with no ok point below it (seq 256 is
    absent at head_dim 128) is not a line."""
    grid = {(16, 1024): "ok", (16, 4096): "ok", (16, 16384): "oom", (16, 65536): "oom",
            (64, 1024): "ok", (64, 4096): "oom", (128, 4096): "oom"}
    rows = [{"run_id": "r", "suite": "a", "component": "attention", "impl": impl, "mode": "fwd",
             "point": {"batch": 8, "heads": 16, "seq": seq, "head_dim": hd, "causal": True}, "dtype": "bf16",
             "device": "NVIDIA H200", "status": status, "reason": "CUDA out of memory" if status == "oom" else "",
             "flops": 4.0 * seq * seq * hd, "bytes": 1.0, "baseline": "naive",
             **({"samples_ms": [1.0] * 3, "median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0} if status == "ok" else {})}
            for (hd, seq), st in grid.items() for impl, status in (("naive", st), ("sdpa", "ok"))]
    from reports.render import first_oom, prepare
    from bench.results import load

    lines = first_oom(prepare(load([str(write(tmp_path / "a.jsonl", rows))])))
    got = {(o["impl"], o["axis"], o["ok"], o["oom"], o["at"]) for o in lines}
    assert got == {("naive", "seq", 4096, 16384, "batch=8,heads=16,head_dim=16,causal=True"),
                   ("naive", "seq", 1024, 4096, "batch=8,heads=16,head_dim=64,causal=True"),
                   ("naive", "head_dim", 16, 64, "batch=8,heads=16,seq=4096,causal=True")}
    page = render([str(tmp_path / "a.jsonl")], tmp_path / "out").read_text()
    assert "Where memory runs out" in page and "batch=8,heads=16,head_dim=64,causal=True" in page


def test_table_leaves_out_columns_no_row_fills(tmp_path):
    page = render([str(write(tmp_path / "x.jsonl", fixture_rows()))], tmp_path / "out").read_text()
    section = page.split('id="c-1"')[1]  # rmsnorm (matmul is c-0)
    header = section.split("<thead>")[1].split("</thead>")[0]
    assert "median ms" in header and "reason / note" in header and "status" in header
    assert "comm % of step" not in header and "peak MB" not in header  # nothing fills them here
    assert "late samples" not in header


def test_a_case_in_several_files_is_shown_once_the_newest(tmp_path):
    """Files given together may repeat a case (a rerun beside the first run); the newest row of each stands,
    whatever the order of the files, and the page says how many were left out."""
    from reports.render import prepare

    newer = fixture_rows(scale=2.0, run="run-b")
    for r in newer:
        r["time"] = "2026-11-30T20:00:00+00:00"
        r["late_samples"] = 3  # samples the timer dropped because the host was late: a column when present
        r["kernel_configs"] = {"_rmsnorm_fwd_kernel": "ROWS=4 warps=8"}  # what the autotuner chose
        r["autotune_ms"] = {"_rmsnorm_fwd_kernel": {"ROWS=4 warps=8": 0.0200, "ROWS=4 warps=4": 0.0242,
                                                    "ROWS=2 warps=4": 0.0300, "ROWS=8 warps=1": None}}
        # what it measured (None: a candidate that failed, its inf stored as null)
    rmsnorm = [r for r in fixture_rows() if r["component"] == "rmsnorm"]
    paths = [str(write(tmp_path / "new.jsonl", newer)), str(write(tmp_path / "old.jsonl", rmsnorm))]
    df = prepare(results.load(paths))
    assert len(df) == len(newer) and set(df["run_id"]) == {"run-b"} and df.attrs["superseded"] == len(rmsnorm)
    page = render(paths, tmp_path / "out").read_text()
    assert f"{len(rmsnorm)} older rows of the same cases left out" in page
    assert "<th" in page and "late samples" in page and "_rmsnorm_fwd_kernel: ROWS=4 warps=8" in page
    assert "_rmsnorm_fwd_kernel: 4 tried, runner-up +21%" in page  # the autotuner's margin over its second pick


def test_speedups_fall_back_to_an_impl_that_ran_and_ticks_name_only_the_axes_that_vary(tmp_path):
    """A sweep without the component's reference (attention's naive) still gets speedups, over the impl measured
    at the most points; tick labels leave out the axes every point of a panel shares (the panel title names
    them)."""
    from reports.render import _varying_labels, prepare

    rows = []
    for impl, n_points in (("triton", 3), ("sdpa", 3), ("compile", 2)):
        for seq in (256, 1024, 4096)[:n_points]:
            med = seq / 1e4 * {"triton": 1.0, "sdpa": 2.0, "compile": 4.0}[impl]
            rows.append({"run_id": "r", "time": "2026-11-30T10:00:00+00:00", "suite": "attention",
                         "component": "attention", "impl": impl, "mode": "fwd",
                         "point": {"batch": 8, "heads": 16, "seq": seq, "head_dim": 64, "causal": True},
                         "dtype": "bf16", "device": "NVIDIA H200", "status": "ok", "median_ms": med,
                         "p20_ms": med, "p80_ms": med, "flops": 1e9 * seq, "bytes": 1e6 * seq, "baseline": "naive"})
    path = write(tmp_path / "sweep.jsonl", rows)
    df = prepare(results.load([str(path)]))
    assert set(df["baseline_impl"]) == {"sdpa"}  # naive never ran; sdpa and triton ran at 3 points, sdpa first by name
    speed = df.set_index(["impl", df["point"].map(lambda p: p["seq"])])["speedup"]
    assert speed[("triton", 1024)] == pytest.approx(2.0) and speed[("compile", 256)] == pytest.approx(0.5)
    page = render([str(path)], tmp_path / "out").read_text()
    assert "Speedup over sdpa" in page and "fwd, bf16 on NVIDIA H200 (batch=8,heads=16,head_dim=64,causal=True)" in page
    charts = charts_of(page)
    ticks = {x for fig in charts.values() for trace in fig.get("data", []) if trace.get("type") == "scatter"
             and trace.get("mode") == "lines+markers" for x in trace["x"]}
    assert ticks == {"seq=256", "seq=1024", "seq=4096"}
    # nothing shared, or one point: the whole point names each tick
    assert _varying_labels([{"a": 1, "b": 2}, {"a": 2, "b": 3}]) == ("", ["a=1,b=2", "a=2,b=3"])
    assert _varying_labels([{"a": 1, "b": 2}]) == ("", ["a=1,b=2"])


def test_machines_list_each_runs_copy_probe(tmp_path):
    """A run that recorded a copy probe (bench.calibrate.copy_probe) shows it under its machine's ceilings, one line
    a run; a run without one adds nothing."""
    probed = [dict(r, env={**r["env"], "copy_probe": {"mib": 32, "us": 18.9, "gbps": 3550.6}})
              for r in fixture_rows(run="run-a") if "env" in r]
    other = [dict(r, dtype="fp32", env={**r["env"], "copy_probe": {"mib": 32, "us": 20.4, "gbps": 3289.5}})
             for r in fixture_rows(run="run-b", scale=1.1) if "env" in r]  # other cases: both runs are shown
    page = render([str(write(tmp_path / "a.jsonl", probed)), str(write(tmp_path / "b.jsonl", other))],
                  tmp_path / "out").read_text()
    assert "copy probe, run run-a: 32 MiB into 32 MiB in 18.90 us (3,551 GB/s)" in page
    assert "copy probe, run run-b: 32 MiB into 32 MiB in 20.40 us (3,290 GB/s)" in page
    bare = render([str(write(tmp_path / "c.jsonl", fixture_rows()))], tmp_path / "out2").read_text()
    assert "copy probe" not in bare


def values(array) -> list:
    """A trace's numbers: a list, or plotly's packed form of a numpy array ({"dtype", "bdata"})."""
    if isinstance(array, dict):
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return array


def test_time_chart_draws_the_roofline_prediction_beside_the_measurements(tmp_path):
    """Measured against predicted, point by point: the time chart's first trace is the cost model's time of
    each point (the same for every impl), in the panel's order of points."""
    page = render([str(write(tmp_path / "x.jsonl", fixture_rows()))], tmp_path / "out").read_text()
    time_charts = [c for c in charts_of(page).values() if c["layout"]["title"]["text"].startswith("Time per call")]
    assert len(time_charts) == 1
    roof = time_charts[0]["data"][0]
    assert roof["name"] == "roofline (predicted)"
    assert roof["x"] == ["tokens=1024", "tokens=4096", "tokens=16384"]
    assert roof["y"] == pytest.approx([4.0 * t * 4096 / 4.3e9 for t in (1024, 4096, 16384)])
    assert "ms predicted (memory-bound)" in roof["text"][0]
    measured = {t["name"]: values(t["y"]) for t in time_charts[0]["data"][1:]}
    assert measured["triton"] == pytest.approx([0.01 * t / 1024 * 0.6 for t in (1024, 4096, 16384)])


def test_overview_counts_wrong_and_unfinished_rows_but_not_out_of_memory(tmp_path):
    """Out of memory is where the machine ends (the section names the first such point), not a failure: a
    component whose only other rows ran out of memory still reads as agreeing with float64."""
    def rows(statuses):
        return [{"run_id": "r", "suite": "s", "component": "softmax", "impl": "eager", "mode": "fwd",
                 "point": {"rows": 2**i, "dim": 768}, "dtype": "bf16", "device": "NVIDIA H200", "status": st,
                 "reason": "", "flops": 1.0, "bytes": 1.0, "baseline": "eager",
                 **({"samples_ms": [1.0] * 3, "median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0} if st == "ok" else {})}
                for i, st in enumerate(statuses)]

    def overview_cell(statuses, name):
        page = render([str(write(tmp_path / f"{name}.jsonl", rows(statuses)))], tmp_path / name).read_text()
        return page.split('id="overview-table"')[1].split("</table>")[0]

    cell = overview_cell(["ok", "ok", "oom"], "oom")
    assert "all checked rows agree with float64" in cell and "oom 1" in cell and "&#10007;" not in cell
    cell = overview_cell(["ok", "mismatch", "oom"], "wrong")
    assert "1 disagree with float64" in cell and "all checked rows agree" not in cell
    cell = overview_cell(["ok", "error", "timeout", "oom"], "failed")
    assert "all checked rows agree with float64" in cell and "2 ended in an error or a timeout" in cell


def test_wall_time_sums_each_runs_span_not_the_days_between_runs(tmp_path):
    def run(run_id, day):
        rows = fixture_rows(run=run_id)[:4]
        for i, r in enumerate(rows):  # rows 0, 5, 10 and 15 minutes into the run
            r["time"] = f"2026-11-{day}T10:{5 * i:02d}:00+00:00"
            r["point"] = {"tokens": 1024 * (i + 1), "dim": 4096, "run": run_id}  # distinct cases
        return rows

    paths = [str(write(tmp_path / "a.jsonl", run("run-a", 20))), str(write(tmp_path / "b.jsonl", run("run-b", 27)))]
    page = render(paths, tmp_path / "out").read_text()
    machines = page.split("<h2>Machines</h2>")[1].split("</table>")[0]
    assert ">30.0 min<" in machines  # 15 + 15, not the week between the runs


def test_a_panel_of_one_impl_has_no_speedup_chart_and_equal_work_points_sort_by_value(tmp_path):
    """Data-parallel strategies at one step's work: bucket sizes read 1, 10, 25, 100, in the time chart and the
    memory chart, whose bars are named by impl and what differs (the shared axes in its title); a panel with
    one impl gets no speedup chart (its speedup over itself is 1 everywhere)."""
    rows = []
    for impl, mbs in (("bucketed", (25, 1, 100, 10)), ("ddp", (25,))):
        for mb in mbs:
            rows.append({"run_id": "r", "suite": "d", "component": "data_parallel", "impl": impl, "mode": "step",
                         "point": {"config": "xl", "batch": 4, "world_size": 2, "bucket_mb": mb}, "dtype": "bf16",
                         "device": "NVIDIA H200", "status": "ok", "samples_ms": [200.0] * 3, "median_ms": 200.0,
                         "p20_ms": 200.0, "p80_ms": 200.0, "flops": 2e13, "bytes": 1e11, "predicted_ms": 30.0,
                         "bound": "compute", "baseline": "ddp", "peak_mem_bytes": 40 * 2**30,
                         "predicted_mem_bytes": 38 * 2**30})
    solo = [dict(r, component="collectives", impl="torch", baseline="torch", peak_mem_bytes=None,
                 predicted_mem_bytes=None) for r in rows if r["impl"] == "ddp"]
    page = render([str(write(tmp_path / "d.jsonl", rows + solo))], tmp_path / "out").read_text()
    charts = charts_of(page)
    times = [c for c in charts.values() if c["layout"]["title"]["text"].startswith("Time per call")]
    ticks = {tuple(t["x"]) for c in times for t in c["data"]}
    assert ("bucket_mb=1", "bucket_mb=10", "bucket_mb=25", "bucket_mb=100") in ticks
    speedups = [c for c in charts.values() if c["layout"]["title"]["text"].startswith("Speedup over")]
    assert len(times) == 2 and len(speedups) == 1  # data_parallel's; collectives' one impl has none
    mem = [c for c in charts.values() if "Peak memory per rank" in c["layout"]["title"]["text"]]
    assert len(mem) == 1 and mem[0]["layout"]["title"]["text"] == "Peak memory per rank on NVIDIA H200 (config=xl,batch=4,world_size=2)"
    assert mem[0]["data"][0]["x"] == ["bucketed bucket_mb=1", "bucketed bucket_mb=10", "bucketed bucket_mb=25",
                                      "bucketed bucket_mb=100", "ddp bucket_mb=25"]


def test_a_panel_of_one_point_puts_the_impls_along_x(tmp_path):
    """DDP against FSDP at one step: each impl its own place on x (not all stacked on one tick), the roofline
    across them, the point in the panel's title."""
    point = {"config": "tiny", "batch": 2, "world_size": 2}
    rows = [{"run_id": "r", "suite": "d", "component": "data_parallel", "impl": impl, "mode": "step", "point": point,
             "dtype": "fp32", "device": "cpu:x", "status": "ok", "samples_ms": [ms] * 3, "median_ms": ms,
             "p20_ms": ms, "p80_ms": ms, "flops": 1e9, "bytes": 1e8, "predicted_ms": 2.0, "bound": "compute",
             "baseline": "ddp"} for impl, ms in (("fsdp2", 25.0), ("ddp", 7.0), ("zero1", 7.5))]
    page = render([str(write(tmp_path / "d.jsonl", rows))], tmp_path / "out").read_text()
    assert "step, fp32 on cpu:x (config=tiny,batch=2,world_size=2)" in page
    charts = charts_of(page)
    time = next(c for c in charts.values() if c["layout"]["title"]["text"].startswith("Time per call"))
    assert time["layout"]["xaxis"]["title"]["text"] == "implementation"
    roof, *measured = time["data"]
    assert roof["x"] == ["ddp", "fsdp2", "zero1"] and roof["y"] == [2.0, 2.0, 2.0]
    assert {t["name"]: (t["x"], values(t["y"])) for t in measured} == {
        "ddp": (["ddp"], [7.0]), "fsdp2": (["fsdp2"], [25.0]), "zero1": (["zero1"], [7.5])}
    speed = next(c for c in charts.values() if c["layout"]["title"]["text"] == "Speedup over ddp")
    assert {t["name"]: values(t["y"])[0] for t in speed["data"]} == pytest.approx(
        {"ddp": 1.0, "fsdp2": 7.0 / 25.0, "zero1": 7.0 / 7.5})
