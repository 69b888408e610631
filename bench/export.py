"""Export rows to pytest-benchmark's JSON format, so `pytest-benchmark compare` and its tooling read them.

Statistics come from pytest-benchmark's own Stats class fed with our samples (seconds), so every field it
shows (min, max, mean, stddev, median, iqr, outliers, ops) is computed the way it computes them.
"""
from __future__ import annotations

import datetime as dt
import json
import platform

from pytest_benchmark import __version__ as pb_version
from pytest_benchmark.stats import Stats

from bench.results import atomic_write, read_rows


def _name(row: dict) -> str:
    point = ",".join(f"{k}={v}" for k, v in row["point"].items())
    return f"{row['component']}[{row['impl']}-{row['mode']}-{row['dtype']}-{point}]"


def to_pytest_benchmark(paths: list[str]) -> dict:
    benches = []
    first = None
    for path in paths:
        for row in read_rows(path):
            first = first or row
            samples = row.get("samples_ms")
            if row.get("status") != "ok" or not samples:
                continue
            st = Stats()
            for s in samples:
                st.update(s / 1e3)
            name = _name(row)
            benches.append({
                "group": f"{row['component']}:{row['mode']}:{row['dtype']}",
                "name": name,
                "fullname": f"{row.get('suite', 'bench')}::{name}",
                "params": {"impl": row["impl"], **row["point"]},
                "param": row["impl"],
                "extra_info": {k: row.get(k) for k in ("device", "flops", "bytes", "predicted_ms", "bound",
                                                       "roofline_pct", "tflops", "gbps", "rel_err", "run_id")},
                "options": {"timer": row.get("timer", "bench"), "min_rounds": 10, "max_time": None, "min_time": None,
                            "warmup": True, "disable_gc": False},
                "stats": {**st.as_dict(), "iterations": row.get("calls_per_sample", 1), "data": [s / 1e3 for s in samples]},
            })
    env = (first or {}).get("env", {}) or {}
    return {
        "machine_info": {"node": env.get("host", platform.node()), "processor": env.get("cpu", ""),
                         "machine": platform.machine(), "python_version": env.get("python", platform.python_version()),
                         "python_implementation": platform.python_implementation(),
                         "system": platform.system(), "release": platform.release(), "cpu": {"brand_raw": env.get("cpu", "")},
                         "gpu": env.get("gpu"), "torch": env.get("torch")},
        "commit_info": {"id": (first or {}).get("git_sha", "unknown"), "dirty": "dirty" in str((first or {}).get("git_sha")),
                        "project": "llm-bench", "branch": None},
        "benchmarks": benches,
        "datetime": (first or {}).get("time") or dt.datetime.now(dt.timezone.utc).isoformat(),
        "version": pb_version,
    }


def export(paths: list[str], out: str) -> int:
    data = to_pytest_benchmark(paths)
    atomic_write(out, json.dumps(data, indent=2))
    return len(data["benchmarks"])
