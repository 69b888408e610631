"""Dtype names used in suites and rows, and what they mean to torch.

`tf32` is float32 storage with matrix products on the tensor cores' tf32 mode; every other name is a plain
torch dtype.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

TORCH = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "tf32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def torch_dtype(name: str) -> torch.dtype:
    return TORCH[name]


def itemsize(name: str) -> int:
    return TORCH[name].itemsize


@contextmanager
def precision(name: str):
    """Matrix-product precision for the duration of a call: tf32 on for `tf32`, off otherwise."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    on = name == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
