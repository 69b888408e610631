"""Session 31: why the autotuners misread configs at 65536 x 16384 (bf16 forward).

In the session's norms run (49bca7b) the autotuner's benchmark (bench.timing.autotune_bench) read softmax's 16-warp
config at 1.13 ms and took 32 warps (1.096 ms in the bench), where session 30's bench read 16 warps at 1.035; it
read rmsnorm's two configs 1.11 and 1.15 ms, and the bench then 1.000. Smaller shapes were read as the bench reads
them. Here bench's worker measures the point as `bench run` does (eager, builtin, compile, triton: the triton
case tunes inside its check call), with the autotuners' benchmark wrapped to keep each config's samples in order;
then the autotuner's cache is cleared and it tunes again: right away, after the host idles 1 s before each config
(as while a config compiles), and right away again.

Run from the repository root: python3 baselines/h200/s31/explore82.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s31/explore82.py --smoke   (CPU)
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
from bench.execute import Case, Worker, _autotuners, _config_text  # noqa: E402
from bench.timing import AUTOTUNE_TIMING, TimingConfig, time_cuda  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402

LOG: list[dict] = []
IDLE = [0.0]  # host seconds before each config's benchmark


def logged_bench(fn, quantiles=None, **_):
    """autotune_bench, keeping the samples in order."""
    time.sleep(IDLE[0])
    t = time_cuda(fn, AUTOTUNE_TIMING)
    LOG.append(dict(samples=[round(s, 4) for s in t.samples_ms], warm=t.warmup_calls, late=t.extra.get("late_samples"),
                    first_ms=round(t.first_call_ms, 3)))
    med = sorted(t.samples_ms)[len(t.samples_ms) // 2]
    return med if quantiles is None else [med] * len(quantiles)


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    worker = Worker(dev, TimingConfig.quick() if smoke else TimingConfig.for_device(dev))
    if not smoke:
        set_benchmark(logged_bench)
    big = 37 if smoke else 65536
    for comp, key in (("softmax", "rows"), ("rmsnorm", "tokens")):
        point = {key: big, "dim": 300 if smoke else 16384}
        for impl in ("eager", "builtin", "compile", "triton"):
            LOG.clear()
            row = worker.measure(Case(comp, impl, "fwd", point, "bf16"))
            emit(out, what="bench", comp=comp, impl=impl, status=row["status"], median_ms=row.get("median_ms"),
                 configs=row.get("kernel_configs"), autotune_ms=row.get("autotune_ms"), log=list(LOG))
        # tune again on the same inputs, the kernels compiled
        c = registry.get(comp)
        fn = c.impls["triton"].build(point, "bf16", dev)
        inputs = c.make_inputs(point, torch.bfloat16, dev, 0)
        for label, idle in (("again", 0.0), ("idle 1 s before each config", 1.0), ("again", 0.0)):
            for tuner in _autotuners():
                tuner.cache.clear()
                tuner.configs_timings = None
            LOG.clear()
            IDLE[0] = idle
            fn(**inputs)
            if dev == "cuda":
                torch.cuda.synchronize()
            IDLE[0] = 0.0
            timings = {tuner.fn.__name__: {_config_text(k): v for k, v in tuner.configs_timings.items()}
                       for tuner in _autotuners() if tuner.configs_timings}
            emit(out, what="retune", comp=comp, label=label, timings=timings, log=list(LOG))
        del fn, inputs
        worker._release()


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(paths[0] if paths else None, smoke)
