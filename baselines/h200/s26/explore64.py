"""Session 26: the interleaved row walk at 768-wide rows, where the bench at e3591b3 read layernorm's backward
8.7% slower at 4096 x 768 (its autotuner took STAGES 1 where it had taken 3). explore63's kernels, contiguous
(`contig`) and interleaved (`inter`) walks at fixed configs (ROWS, warps, STAGES), beside the library.

Run from the repository root: python3 baselines/h200/s26/explore64.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s26/explore64.py --smoke   (CPU: checks only)
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explore63 as E  # noqa: E402


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"]  # noqa: E731
    configs = [(2, 4, 3)] if smoke else [(4, 4, 3), (4, 4, 1), (2, 2, 3), (2, 2, 1)]
    bad = 0
    for n_rows, dim in ([(37, 300)] if smoke else [(4096, 768), (1024, 768)]):
        x, dy, w, b = E.inputs(n_rows, dim, dev)
        _, rstd = E.RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = E.LN.layernorm_fwd(x, w, b)
        rms_ref = E.RN.rmsnorm_bwd(dy, x, w, rstd)
        ln_ref = E.LN.layernorm_bwd(dy, x, w, mean, lrstd)
        calls = {("rmsnorm", "lib"): lambda: E.RN.rmsnorm_bwd(dy, x, w, rstd),
                 ("layernorm", "lib"): lambda: E.LN.layernorm_bwd(dy, x, w, mean, lrstd)}
        for c in configs:
            for inter in (False, True):
                name = f"{'inter' if inter else 'contig'} ROWS={c[0]} warps={c[1]} STAGES={c[2]}"
                calls[("rmsnorm", name)] = lambda c=c, inter=inter: E.rms_call(dy, x, w, rstd, c, inter)
                calls[("layernorm", name)] = lambda c=c, inter=inter: E.ln_call(dy, x, w, mean, lrstd, c, inter)
        for rnd in range(1 if smoke else 3):
            for (norm, name), fn in calls.items():
                if rnd == 0:
                    err = E.rel(fn(), rms_ref if norm == "rmsnorm" else ln_ref)
                    bad += err > 2e-2
                    E.emit(out, kind="check", norm=norm, shape=[n_rows, dim], variant=name, err=err, ok=err <= 2e-2)
                if timer:
                    E.emit(out, kind="time", norm=norm, shape=[n_rows, dim], variant=name, round=rnd,
                           us=round(timer(fn) * 1e3, 2))
    if bad:
        raise SystemExit(f"{bad} variants off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
