"""Launch helpers shared by the row-wise kernels (rmsnorm, layernorm, softmax)."""
from __future__ import annotations

import os

import torch
import triton

MAX_BLOCK = 8192  # elements of a row a backward kernel holds at once; longer rows are walked in chunks
MAX_BLOCK_FWD = 16384  # forward kernels hold fewer arrays, so a 16K row still fits in registers
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def row_block(n_cols: int, max_block: int = MAX_BLOCK) -> tuple[int, bool]:
    """(BLOCK, whether a row fits one block) for rows of n_cols elements."""
    block = min(triton.next_power_of_2(max(n_cols, 1)), max_block)
    return block, n_cols <= block


def _keep_sensible_warps(configs, named_args, **kwargs):
    """Autotune prune: only warp counts that give each thread 2..64 elements of the block."""
    block = kwargs.get("BLOCK", named_args.get("BLOCK"))
    kept = [c for c in configs if 2 <= block // (32 * c.num_warps) <= 64]
    return kept or [min(configs, key=lambda c: c.num_warps)]


def tuned_warps(key: tuple[str, ...] = ("n_cols",)):
    """triton.autotune over num_warps, keyed by the row length (and, implicitly, the dtypes); the CPU
    interpreter gets one config."""
    warps = (4,) if _INTERPRETED else (1, 2, 4, 8, 16, 32)
    return triton.autotune(configs=[triton.Config({}, num_warps=w) for w in warps], key=list(key),
                           prune_configs_by={"early_config_prune": _keep_sensible_warps})


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """x [..., dim] as a 2-D [rows, dim] view with unit stride along dim (copied only if needed)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    return x.reshape(-1, x.shape[-1])


def reduction_programs(n_rows: int, device: torch.device) -> tuple[int, int]:
    """(programs, rows per program) for backward kernels that reduce dw/db through per-program partial rows.
    Up to four programs per SM, but at least 16 rows each once every SM has one, so the [programs, dim] fp32
    partials stay small next to the rows themselves (at 1024 x 16384 they were a third of the traffic)."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    programs = max(1, min(n_rows, 4 * sms, max(sms, n_rows // 16)))
    rows_per_program = triton.cdiv(n_rows, programs) if n_rows else 1
    return (triton.cdiv(n_rows, rows_per_program) if n_rows else 1), rows_per_program
