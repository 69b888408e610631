"""Launch helpers shared by the row-wise kernels (rmsnorm, layernorm, softmax)."""
from __future__ import annotations

import torch
import triton

MAX_BLOCK = 8192  # elements of a row held at once; longer rows are processed in chunks of this size


def row_block(n_cols: int) -> tuple[int, bool, int]:
    """(BLOCK, whether a row fits one block, num_warps) for rows of n_cols elements."""
    block = min(triton.next_power_of_2(max(n_cols, 1)), MAX_BLOCK)
    warps = 4 if block <= 2048 else (8 if block <= 4096 else 16)
    return block, n_cols <= block, warps


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """x [..., dim] as a 2-D [rows, dim] view with unit stride along dim (copied only if needed)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    return x.reshape(-1, x.shape[-1])


def reduction_programs(n_rows: int, device: torch.device) -> tuple[int, int]:
    """(programs, rows per program) for backward kernels that reduce dw/db through per-program partial rows:
    about four programs per SM, each walking a contiguous block of rows."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    programs = max(1, min(n_rows, 4 * sms))
    rows_per_program = triton.cdiv(n_rows, programs) if n_rows else 1
    return (triton.cdiv(n_rows, rows_per_program) if n_rows else 1), rows_per_program
