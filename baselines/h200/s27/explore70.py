"""Session 27: do the launchers' new input checks (kernels._autotune.check_dtype, kernels._rows.check_backward,
commits fe09ac3 and ce41580) cost time? The bench at a76eea2 read 8 triton rows at 1024- and 4096-row shapes 6-17%
slower than the baseline file, with the kernels' own autotuning times 7-17% higher too on that lease (kernel calls
the checks do not touch). Here the same functions with the checks as they are and replaced by no-ops, in one
process, alternating, three rounds, timed by bench.timing (L2 zeroed before each call).

Run from the repository root: python3 baselines/h200/s27/explore70.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s27/explore70.py --smoke   (CPU: runs each once)
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
_spec.loader.exec_module(E65)  # emit, inputs

from kernels import _rows  # noqa: E402
from kernels import layernorm as LN  # noqa: E402
from kernels import rmsnorm as RN  # noqa: E402
from kernels import softmax as SM  # noqa: E402

CHECKED = {"check_dtype": _rows.check_dtype, "check_backward": (RN.check_backward, LN.check_backward,
                                                                SM.check_backward)}


def checks(on: bool) -> None:
    nop = lambda *a, **k: None  # noqa: E731
    _rows.check_dtype = CHECKED["check_dtype"] if on else nop
    for mod, fn in zip((RN, LN, SM), CHECKED["check_backward"]):
        mod.check_backward = fn if on else nop


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    timer = (lambda fn: fn()) if smoke else None
    if not smoke:
        import bench.timing as BT
        cfg = BT.TimingConfig()
        timer = lambda fn: BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3  # noqa: E731
        E65.emit(out, kind="env", torch=torch.__version__, gpu=torch.cuda.get_device_name())
    cases = []
    for rows, dim in ([(5, 40)] if smoke else [(1024, 768), (1024, 4096), (4096, 768)]):
        x, dy, w, b = E65.inputs(rows, dim, dev)
        _, rstd = RN.rmsnorm_fwd(x, w)
        _, mean, lrstd = LN.layernorm_fwd(x, w, b)
        y = SM.softmax_fwd(x)
        cases += [(f"rmsnorm fwd {rows}x{dim}", lambda x=x, w=w: RN.rmsnorm_fwd(x, w, stats=False)),
                  (f"rmsnorm bwd {rows}x{dim}", lambda x=x, w=w, dy=dy, r=rstd: RN.rmsnorm_bwd(dy, x, w, r)),
                  (f"layernorm fwd {rows}x{dim}", lambda x=x, w=w, b=b: LN.layernorm_fwd(x, w, b, stats=False)),
                  (f"layernorm bwd {rows}x{dim}",
                   lambda x=x, w=w, dy=dy, m=mean, r=lrstd: LN.layernorm_bwd(dy, x, w, m, r)),
                  (f"softmax fwd {rows}x{dim}", lambda x=x: SM.softmax_fwd(x)),
                  (f"softmax bwd {rows}x{dim}", lambda y=y, dy=dy: SM.softmax_bwd(dy, y))]
    for name, fn in cases:
        fn()  # autotune once, outside the timing
    for rnd in range(1 if smoke else 3):
        for name, fn in cases:
            for on in (True, False):
                checks(on)
                us = timer(fn)
                if not smoke:
                    E65.emit(out, kind="time", case=name, checks=on, round=rnd, us=round(us, 3))
    checks(True)
    if smoke:
        print(f"{len(cases)} cases ran with the checks on and off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
