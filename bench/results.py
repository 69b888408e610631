"""Result rows: tidy JSONL, one row per component x impl x mode x point x dtype.

Rows are appended and flushed as each point finishes, so an interrupted run loses nothing measured.
`load(paths)` is the one reader: it skips (and reports, with line numbers) truncated or corrupt lines.
Whole files (reports, caches, exports) go through `atomic_write`. No torch here: reports read rows too.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Iterable, Iterator

import pandas as pd

STATUSES = ("ok", "mismatch", "oom", "error", "skipped", "timeout")
COLUMNS = [
    "run_id", "time", "git_sha", "suite", "component", "impl", "mode", "point", "dtype", "device", "world_size",
    "status", "reason", "samples_ms", "median_ms", "p20_ms", "p80_ms", "mean_ms", "std_ms", "n", "cpu_ms",
    "flops", "bytes", "intensity", "predicted_ms", "bound", "roofline_pct", "tflops", "gbps", "ceiling_source",
    "rel_err", "max_abs_err", "tol", "check_note", "peak_mem_bytes", "compile_s", "clocks", "timer",
    "l2_flushed", "env",
]
KEY = ["component", "impl", "mode", "point_key", "dtype", "device"]
IDENTITY = ("component", "impl", "mode", "point", "dtype", "status")  # what every row a run writes names


class ResultsWarning(UserWarning):
    pass


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write a whole file so that readers see the old one or the new one, never half of either."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report or cache should read like any file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _clean(v):
    """JSON has no NaN/Inf: store them as null (a check with infinite error keeps its status and reason)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


class Writer:
    """Appends rows to a JSONL file, one flush (and fsync) per row."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._f = open(self.path, "a", encoding="utf-8")

    def _repair_tail(self) -> None:
        """A run killed mid-write can leave a last line without its newline: end it, so the next row
        starts on its own line (the reader then skips the broken one)."""
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def write(self, row: dict) -> None:
        self._f.write(json.dumps(_clean(row), sort_keys=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_rows(path: str | Path, warn: bool = True) -> list[dict]:
    """The rows of a results file; a name ending in .gz is read through gzip (old baselines are kept so). A line
    that is no JSON object, or an object without the fields of a result row (an explore script's row, a
    pytest-benchmark file), is skipped with a warning that names it: a gate fed the wrong file must not pass."""
    return list(_rows(path, warn))


def holds_rows(path: str | Path) -> bool:
    """Whether a results file has a result row in it, read up to the first."""
    return next(_rows(path, warn=False), None) is not None


def _rows(path: str | Path, warn: bool) -> Iterator[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                if warn:
                    warnings.warn(f"{path}:{lineno}: corrupt or truncated row skipped ({e})", ResultsWarning, stacklevel=3)
                continue
            missing = [k for k in IDENTITY if k not in row]
            if missing:
                if warn:
                    warnings.warn(f"{path}:{lineno}: not a result row, skipped (no {', '.join(missing)})",
                                  ResultsWarning, stacklevel=3)
                continue
            yield row


def point_key(point) -> str:
    return json.dumps(point, sort_keys=True)


def point_label(point) -> str:
    """A point as `k=v,k=v` in its order: no '/' (ncu's NVTX filter reads it as nesting), no spaces. Also takes a
    results key's JSON text of a point; anything else reads as it is."""
    if isinstance(point, str):
        try:
            point = json.loads(point)
        except ValueError:
            return point
    if isinstance(point, dict):
        return ",".join(f"{k}={v}" for k, v in point.items())
    return str(point)


def natural_key(value) -> tuple:
    """Sort key: numbers by value before words ("1", "10", "25", "100"; not "1", "10", "100", "25"); a point by its
    values in order."""
    if isinstance(value, dict):
        return tuple(natural_key(v) for v in value.values())
    if not isinstance(value, bool):  # true/false sort as words
        try:
            return (0, float(value), "")
        except (TypeError, ValueError):
            pass
    return (1, 0.0, str(value))


def load(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """Rows of one or more JSONL files as a DataFrame with every documented column (missing ones NaN)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows = []
    for p in paths:
        for row in read_rows(p):
            row.setdefault("source", str(p))
            rows.append(row)
    df = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    df["point_key"] = df["point"].map(lambda p: point_key(p) if isinstance(p, dict) else str(p))
    return df


def git_sha(cwd: str | Path | None = None) -> str:
    """The checkout's commit (with -dirty); $BENCH_GIT_SHA wins, for copies of the tree without .git."""
    if os.environ.get("BENCH_GIT_SHA"):
        return os.environ["BENCH_GIT_SHA"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd or Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        sha = out.stdout.strip()
        if not sha:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd or Path(__file__).parent,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str) -> dict:
    """Versions and hardware; called inside the worker, which has torch imported anyway."""
    import torch

    env = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "triton": None,
        "cuda": torch.version.cuda,
        "driver": None,
        "gpu": None,
        "gpu_count": 0,
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "host": platform.node(),
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_count=torch.cuda.device_count(), cc=f"{props.major}.{props.minor}",
                   sm_count=props.multi_processor_count, l2_bytes=getattr(props, "L2_cache_size", None),
                   gpu_mem_bytes=props.total_memory)
        try:
            import pynvml

            pynvml.nvmlInit()
            env["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # NVML missing or refused: the driver stays unknown
            pass
    return env


def device_name(env: dict, device: str) -> str:
    return env.get("gpu") if device == "cuda" and env.get("gpu") else f"cpu:{env.get('cpu', 'unknown')}"
