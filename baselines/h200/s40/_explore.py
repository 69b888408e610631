"""What session 40's and 41's explores (explore109-114) share: their command line, their results file, their
inputs, their timed rounds and their offline compile for sm_90a.

Each is run as  python3 SCRIPT OUT.jsonl [ROWSxDIM ...]  on a GPU, or  TRITON_INTERPRET=1 python3 SCRIPT --smoke
on a CPU (every call made once, nothing timed).
"""
from __future__ import annotations

import os
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s32"))

from explore89 import emit  # noqa: E402

from bench.timing import TimingConfig, autotune_bench, time_call  # noqa: E402
from kernels._autotune import set_benchmark  # noqa: E402


def command_line(shapes: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], str | None, bool]:
    """(shapes, the results file or None, whether --smoke) from sys.argv; ROWSxDIM arguments replace `shapes`."""
    picked = [a for a in sys.argv[1:] if a[:1].isdigit()]
    paths = [a for a in sys.argv[1:] if not a.startswith("--") and a not in picked]
    shapes = [tuple(int(v) for v in a.split("x")) for a in picked] or shapes
    return shapes, (paths[0] if paths else None), "--smoke" in sys.argv


def begin(path: str | None, smoke: bool):
    """(the results file opened, or None; the device): on a GPU the autotuners time candidates as bench's worker
    has them do, and the file starts with the run's environment."""
    out = open(path, "w") if path else None
    if smoke:
        return out, "cpu"
    set_benchmark(autotune_bench)
    emit(out, kind="env", gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    return out, "cuda"


def by_shape(key) -> dict:
    """A (rows, dim, impl) key as a `time` row's fields."""
    rows, dim, name = key
    return {"shape": [rows, dim], "impl": name}


def timed_rounds(out, calls: dict, dev: str, fields=by_shape, rounds: int = 3) -> None:
    """Each of `calls` ({key: fn}) timed by bench.timing, `rounds` times in alternation, one `time` row each with
    fields(key)."""
    for rnd in range(rounds):
        for key, fn in calls.items():
            s = time_call(fn, dev, TimingConfig()).summary()
            emit(out, kind="time", round=rnd, **fields(key), median_us=round(s["median_ms"] * 1e3, 3), n=s["n"])


def norm_inputs(rows: int, dim: int, dev: str) -> tuple[torch.Tensor, ...]:
    """x, dy, w, b (bf16) for a norm's backward, drawn in that order from one seeded generator."""
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
    dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    return x, dy, w, b


def compile_offline(fn, sig: dict, consts: dict, divisible: tuple[str, ...], warps: int):
    """(the kernel, ptxas's register and spill lines): @triton.jit kernel fn compiled for sm_90a without a GPU, by
    session 35's explore101 helpers (pointers and the `divisible` integers declared divisible by 16)."""
    from triton.compiler import ASTSource

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s35"))
    from explore101 import compile_sm90, ptxas_info
    kern = compile_sm90(fn, sig, consts, divisible, warps, ASTSource)
    return kern, ptxas_info(kern)
