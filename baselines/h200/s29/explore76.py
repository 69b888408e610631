"""Session 29: the same forward timed standalone and through the bench's Worker, in one process.

explore75 read the library's softmax forward at 4096 x 4096 bf16 at 19.1-19.5 us on eight buffer pairs, where
`../norms.jsonl` (a `bench run`) has 20.8 and session 26's explore62 20.8-21.0. Here, at the 16.8M-element
forward points of softmax and rmsnorm, three rounds alternating:

- `standalone`: the kernel on x = randn + 0.5 (bf16) into a preallocated y, timed by bench.timing.time_cuda;
- `standalone-inputs`: the same on the component's own make_inputs (softmax: 3 * randn);
- `worker`: bench.execute.Worker.measure of the case (triton, fwd, bf16), as a `bench run` worker does it
  (the float64 reference computed and the output checked first, the autotuner's pick recorded);
- `worker-nocheck`: the same without the reference (as `bench run --no-check`).

Run from the repository root: python3 baselines/h200/s29/explore76.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s29/explore76.py --smoke   (CPU)
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench import registry  # noqa: E402
from bench.execute import Case, Worker  # noqa: E402
from bench.timing import TimingConfig, time_cuda  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def kernel_call(component, inputs):
    x = inputs["x"]
    y = torch.empty_like(x)
    if component == "softmax":
        return lambda: SM.softmax_fwd(x, out=y)
    w = inputs.get("w")
    if w is None:
        w = (1 + 0.1 * torch.randn(x.shape[-1], device=x.device)).to(x.dtype)
    return lambda: RN.rmsnorm_fwd(x, w, out=y, stats=False)


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    registry.discover()
    cases = [("softmax", {"rows": 4096, "dim": 4096}), ("softmax", {"rows": 1024, "dim": 16384}),
             ("rmsnorm", {"tokens": 4096, "dim": 4096}), ("rmsnorm", {"tokens": 1024, "dim": 16384})]
    if smoke:
        cases = [("softmax", {"rows": 3, "dim": 50}), ("rmsnorm", {"tokens": 3, "dim": 50})]
    cfg = TimingConfig.quick() if smoke else TimingConfig()
    workers = {"worker": Worker(dev, cfg), "worker-nocheck": Worker(dev, cfg, check=False)}
    if not smoke:
        emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name())
    for rnd in range(1 if smoke else 3):
        for comp_name, point in cases:
            comp = registry.get(comp_name)
            g = torch.Generator(device=dev).manual_seed(rnd)
            shape = (point.get("rows", point.get("tokens")), point["dim"])
            plain = {"x": (torch.randn(*shape, device=dev, generator=g) + 0.5).bfloat16()}
            own = comp.make_inputs(point, torch.bfloat16, dev, rnd)
            for name, inputs in (("standalone", plain), ("standalone-inputs", own)):
                fn = kernel_call(comp_name, inputs)
                if smoke:
                    fn()
                    continue
                us = time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", component=comp_name, point=point, round=rnd, call=name, us=round(us, 2))
            del plain, own
            for name, worker in workers.items():
                row = worker.measure(Case(comp_name, "triton", "fwd", point, "bf16"))
                emit(out, kind="time", component=comp_name, point=point, round=rnd, call=name, status=row["status"],
                     reason=row.get("reason"), us=round(row.get("median_ms", float("nan")) * 1e3, 2),
                     config=row.get("kernel_configs"))
    if smoke:
        print("smoke: every call ran")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
