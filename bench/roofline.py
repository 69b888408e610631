"""Hardware ceilings and the roofline prediction of every row.

prediction = max(flops / peak(dtype, math unit), bytes / memory bandwidth, launch overhead), and for multi-rank
work also comm_bytes / interconnect bandwidth and the interconnect's latency (every collective pays it): each is a
time the work cannot beat, so the largest is the prediction. That is the alpha-beta model of communication in
roofline form, max(alpha, n / bandwidth), not their sum: the bandwidth is calibrated from whole large all-reduces,
latency included, so a sum would count the latency twice there; and the line through the 256 MiB and 1 GiB
all-reduces on 2 x H200 (0.938 and 3.311 ms) meets zero bytes at 147 us, above the 112 us a 1 MB all-reduce took
(NCCL changes protocol with size: no one line fits). Ceilings come from `bench calibrate` (measured with the
suite's own timer, cached per device and driver) when present, else from the datasheet table below.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from bench.results import atomic_write

TFLOP = 1e12
GB = 1e9
MIB = 2**20


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    tensor_flops: dict[str, float]  # dtype -> peak FLOP/s on the matrix units (fp32: exact fp32 products)
    vector_flops: float  # plain fp32 arithmetic (elementwise, reductions)
    mem_bw: float  # bytes/s, device memory
    interconnect_bw: float = 0.0  # bytes/s per direction per device (NVLink, PCIe)
    l2_bytes: int = 0
    launch_s: float = 5e-6  # the least one eager call costs
    comm_latency_s: float = 0.0  # the least one collective costs (a one-element all-reduce); 0: not measured
    source: str = "datasheet"
    measured: dict = field(default_factory=dict)  # what calibration measured, for display

    def peak(self, dtype: str, math: str) -> float:
        if math == "tensor":
            return self.tensor_flops.get(dtype) or self.tensor_flops.get("fp32") or self.vector_flops
        return self.vector_flops

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "DeviceSpec":
        return cls(**d)


def _gpu(name, bf16, tf32, fp32, fp64, bw_gbs, link_gbs, l2_mib, fp16=None):
    return DeviceSpec(
        name=name,
        tensor_flops={"bf16": bf16 * TFLOP, "fp16": (fp16 or bf16) * TFLOP, "tf32": tf32 * TFLOP,
                      "fp32": fp32 * TFLOP, "fp64": fp64 * TFLOP},
        vector_flops=fp32 * TFLOP,
        mem_bw=bw_gbs * GB,
        interconnect_bw=link_gbs * GB,
        l2_bytes=int(l2_mib * MIB),
        launch_s=4e-6,
    )


# Dense (no sparsity) datasheet numbers. Interconnect: NVLink per direction per GPU, PCIe 4.0/5.0 x16 otherwise.
DATASHEET: dict[str, DeviceSpec] = {
    "A100": _gpu("NVIDIA A100 80GB SXM", 312, 156, 19.5, 19.5, 2039, 300, 40),
    "H100": _gpu("NVIDIA H100 SXM", 989, 494, 67, 67, 3350, 450, 50),
    "H100 PCIe": _gpu("NVIDIA H100 PCIe", 756, 378, 51, 51, 2000, 64, 50),
    "H200": _gpu("NVIDIA H200", 989, 494, 67, 67, 4800, 450, 60),
    "B200": _gpu("NVIDIA B200", 2250, 1100, 80, 40, 8000, 900, 126),
    "L4": _gpu("NVIDIA L4", 121, 60, 30.3, 0.49, 300, 32, 48),
    # GeForce: fp16/bf16 with fp32 accumulation runs at half the fp16-accumulate rate (82.6 of 165).
    "RTX 4090": _gpu("NVIDIA GeForce RTX 4090", 82.6, 82.6, 82.6, 1.29, 1008, 32, 72),
}


def datasheet(device_name: str) -> DeviceSpec | None:
    """Match a torch/NVML device name ("NVIDIA H100 80GB HBM3") to the table."""
    n = device_name.upper()
    if "B200" in n:
        return DATASHEET["B200"]
    if "H200" in n:
        return DATASHEET["H200"]
    if "H100" in n:
        return DATASHEET["H100 PCIe" if "PCIE" in n else "H100"]
    if "A100" in n:
        return DATASHEET["A100"]
    if "L4" in n.split() or n.endswith(" L4"):
        return DATASHEET["L4"]
    if "4090" in n:
        return DATASHEET["RTX 4090"]
    return None


# ---- the prediction -------------------------------------------------------------------------------------------

def predict(flops: float, nbytes: float, dtype: str, math: str, spec: DeviceSpec, comm_bytes: float = 0.0) -> dict:
    """Roofline time and which bound sets it."""
    terms = {
        "compute": flops / spec.peak(dtype, math) if flops else 0.0,
        "memory": nbytes / spec.mem_bw if nbytes else 0.0,
        "launch": spec.launch_s,
    }
    if comm_bytes:
        terms["comm"] = comm_bytes / spec.interconnect_bw if spec.interconnect_bw else 0.0
        terms["comm_latency"] = spec.comm_latency_s
    bound = max(terms, key=terms.get)
    out = {"predicted_ms": terms[bound] * 1e3, "bound": bound}
    if comm_bytes and spec.interconnect_bw:  # unknown until `bench calibrate --world-size N` measured it
        out["predicted_comm_ms"] = max(terms["comm"], terms["comm_latency"]) * 1e3
    return out


def annotate(row: dict, cost, spec: DeviceSpec | None) -> dict:
    """Add the cost and roofline fields to a row (measured time from row['median_ms'])."""
    row["flops"], row["bytes"] = float(cost.flops), float(cost.bytes)
    row["intensity"] = cost.flops / cost.bytes if cost.bytes else None
    row["math"] = cost.math
    med = row.get("median_ms")
    if med:
        row["tflops"] = cost.flops / (med * 1e-3) / TFLOP
        row["gbps"] = cost.bytes / (med * 1e-3) / GB
        if cost.comm_bytes:
            row["busbw_gbps"] = cost.comm_bytes / (med * 1e-3) / GB  # nccl-tests' bus bandwidth
    if spec is not None:
        row.update(predict(cost.flops, cost.bytes, row["dtype"], cost.math, spec, cost.comm_bytes))
        row["ceiling_source"] = spec.source
        row["peak_tflops"] = spec.peak(row["dtype"], cost.math) / TFLOP
        row["peak_gbps"] = spec.mem_bw / GB
        if cost.comm_bytes:
            row["peak_comm_gbps"] = spec.interconnect_bw / GB if spec.interconnect_bw else None
        if med:
            row["roofline_pct"] = 100.0 * row["predicted_ms"] / med
    return row


# ---- calibration cache ----------------------------------------------------------------------------------------

def cache_path() -> Path:
    base = os.environ.get("BENCH_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "llm-bench")
    return Path(base) / "calibration.json"


def cache_key(device_name: str, driver: str | None) -> str:
    return f"{device_name}|driver={driver or 'none'}"


def load_cached(device_name: str, driver: str | None) -> DeviceSpec | None:
    path = cache_path()
    try:
        data = json.loads(path.read_text())
        entry = data.get(cache_key(device_name, driver))
        return DeviceSpec.from_json(entry) if entry else None
    except (OSError, ValueError, TypeError):
        return None


def store(spec: DeviceSpec, device_name: str, driver: str | None) -> Path:
    path = cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[cache_key(device_name, driver)] = spec.to_json()
    atomic_write(path, json.dumps(data, indent=2))
    return path


def adopt(path: str | Path, device_name: str, driver: str | None) -> tuple[DeviceSpec, str]:
    """Take `device_name`'s ceilings from calibration file `path` (another machine's cache, e.g. a committed
    baselines/<gpu>/calibration.json) for this machine and driver, so that runs here are judged against the same
    roofline as the baseline's; returns them and the key they were stored under there. ValueError when the file
    holds none for this device."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a calibration file ({e})")
    mine = {k: v for k, v in data.items() if isinstance(v, dict) and k.split("|driver=")[0] == device_name}
    if not mine:
        held = sorted({k.split("|driver=")[0] for k in data}) or ["nothing"]
        raise ValueError(f"{path} holds no ceilings of {device_name}; it holds {', '.join(held)}")
    key = cache_key(device_name, driver) if cache_key(device_name, driver) in mine else sorted(mine)[-1]
    spec = DeviceSpec.from_json(mine[key])
    store(spec, device_name, driver)
    return spec, key


def resolve(device_name: str, driver: str | None) -> DeviceSpec | None:
    """Calibrated ceilings win over datasheet ones; None when neither exists (an unknown device, uncalibrated)."""
    return load_cached(device_name, driver) or datasheet(device_name)


def merge(measured: dict, base: DeviceSpec | None, name: str) -> DeviceSpec:
    """A spec from calibration results, keeping datasheet values for what was not measured."""
    tensor = dict(base.tensor_flops) if base else {}
    tensor.update({k: v for k, v in measured.get("tensor_flops", {}).items() if v})
    spec = DeviceSpec(
        name=name,
        tensor_flops=tensor,
        vector_flops=measured.get("vector_flops") or (base.vector_flops if base else tensor.get("fp32", 0.0)),
        mem_bw=measured.get("mem_bw") or (base.mem_bw if base else 0.0),
        interconnect_bw=measured.get("interconnect_bw") or (base.interconnect_bw if base else 0.0),
        l2_bytes=measured.get("l2_bytes") or (base.l2_bytes if base else 0),
        launch_s=measured.get("launch_s") or (base.launch_s if base else 5e-6),
        comm_latency_s=measured.get("comm_latency_s") or (base.comm_latency_s if base else 0.0),
        source="calibrated",
        measured=measured,
    )
    return spec


COMM_CEILINGS = ("interconnect_bw", "comm_latency_s", "allreduce")


def carried_comm(measured: dict, previous: DeviceSpec | None) -> dict:
    """What an earlier calibration of this device over several ranks measured of the interconnect, for a
    calibration that measures none (one rank), so that it does not drop them; {} when there is nothing to keep."""
    if previous is None or any(measured.get(k) for k in COMM_CEILINGS):
        return {}
    return {k: previous.measured[k] for k in COMM_CEILINGS if previous.measured.get(k)}


def store_quick_calibration(measured: dict, name: str, driver: str | None, log=lambda s: None) -> DeviceSpec:
    """The spec from an automatic quick calibration (a device with no cache entry and no datasheet), stored where
    the cache can be written; where it cannot, `log` says so and the spec serves the run all the same."""
    spec = merge(measured, datasheet(name), name)
    spec = replace(spec, source="calibrated (quick, automatic)")
    try:
        store(spec, name, driver)
    except OSError as e:
        log(f"warning: the ceilings were not cached ({e.filename or cache_path()}: {e.strerror or e}); "
            f"this run uses them, the next one measures again")
    return spec
