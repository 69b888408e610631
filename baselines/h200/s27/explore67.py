"""Session 27: the norm backwards' program count, finely, around the library's (explore66 and explore65 read the
library, 256 programs at 4096 x 4096 and 128 at 1024 x 16384, faster than 2 an SM (264) and 1 an SM (132) of the same
kernel: 34.0-34.5 against 34.6-35.0 us and 36.6-37.4 against 39.1-40.0). Program counts that divide the rows or not,
below and above, with the library's row kernels launched directly (the interleaved walk, ROWS=1) at the autotuner's
picks and the partial rows summed as the library does; and layernorm's 16K-wide rows without the split (the rmsnorm
loop's shape: one program a row range, 16 or 32 warps), which the library takes only for rows up to 8K.

Run from the repository root: python3 baselines/h200/s27/explore67.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s27/explore67.py --smoke   (CPU: checks only)

Smoke: a few variants against float64 at odd shapes. GPU: every variant against the library (max difference over
max |ref| under 2e-2), then timed by bench.timing (L2 zeroed before each call), three rounds in alternation.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
_spec = importlib.util.spec_from_file_location("explore65", os.path.join(HERE, "..", "s26", "explore65.py"))
E65 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(E65)  # launch_rms, launch_ln (the library's kernels at a given program count), emit, ...

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402

POINTS = {  # (rows, dim): [(norm, programs, warps, stages)]
    (4096, 4096): [(n, p, 4, 3) for n in ("rmsnorm", "layernorm") for p in (192, 224, 240, 248, 256, 264, 272)],
    (16384, 4096): [(n, p, 4, 3) for n in ("rmsnorm", "layernorm") for p in (248, 256, 261, 264)],
    (1024, 16384): ([("rmsnorm", p, 16, 3) for p in (64, 96, 112, 120, 124, 128, 132)]
                    + [("layernorm", p, w, s) for p in (120, 128, 132) for w in (16, 32) for s in (1, 3)]),
}
SMOKE = {(37, 300): [("rmsnorm", 5, 4, 3), ("layernorm", 5, 4, 1)], (9, 16384): [("layernorm", 4, 16, 3)]}


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
        E65.emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name(),
                 sms=_rows.sm_count(torch.device(dev)))
    bad = 0
    for (rows, dim), variants in (SMOKE if smoke else POINTS).items():
        x, dy, w, b = E65.inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        if smoke:
            xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
            refs = {"rmsnorm": torch.autograd.grad(xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr,
                                                   (xr, wr), dy.double()),
                    "layernorm": torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5),
                                                     (xr, wr, br), dy.double())}
        else:
            refs = {"rmsnorm": RN.rmsnorm_bwd(dy, x, w, rstd), "layernorm": LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        calls = {("rmsnorm", "lib"): lambda: RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        for norm, p, wp, st in variants:
            calls[(norm, f"P{p} w{wp} s{st}")] = (
                (lambda p=p, wp=wp, st=st: E65.launch_rms(dy, x, w, rstd, p, wp, st)) if norm == "rmsnorm" else
                (lambda p=p, wp=wp, st=st: E65.launch_ln(dy, x, w, mean, lrstd, p, wp, st)))
        for rnd in range(1 if smoke else 3):
            for (norm, name), fn in list(calls.items()):
                if fn is None:
                    continue
                if rnd == 0:
                    try:
                        err = E65.rel(fn(), refs[norm])
                    except Exception as e:  # out of shared memory or registers at some (warps, STAGES)
                        E65.emit(out, kind="error", norm=norm, shape=[rows, dim], variant=name, error=repr(e)[:300])
                        calls[(norm, name)] = None
                        bad += smoke
                        continue
                    bad += err > 2e-2
                    E65.emit(out, kind="check", norm=norm, shape=[rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer:
                    us = timer(fn) * 1e3
                    E65.emit(out, kind="time", norm=norm, shape=[rows, dim], variant=name, round=rnd,
                             us=round(us, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
