"""Launch helpers shared by the row-wise kernels (rmsnorm, layernorm, softmax).

Each kernel takes a tile of ROWS rows x BLOCK columns per step: short rows (dim 768) are packed several to a
program so every program moves enough bytes, long rows get one program (forward) or one step (backward) each.
ROWS and num_warps are autotuned per row length and dtype.
"""
from __future__ import annotations

import torch
import triton

from kernels._autotune import INTERPRETED, quick_bench

MAX_BLOCK = 16384  # elements of a row held in registers at once; longer rows are walked in chunks of this size


def row_block(n_cols: int) -> tuple[int, bool]:
    """(BLOCK, whether a row fits one block) for rows of n_cols elements."""
    block = min(triton.next_power_of_2(max(n_cols, 1)), MAX_BLOCK)
    return block, n_cols <= block


def _sensible(configs, named_args, **kwargs):
    """Autotune prune: several rows per tile only when a row fits one block, tiles of at most 8K elements
    (or one block), and warp counts that give each thread 4..32 elements of the tile."""
    block = kwargs.get("BLOCK", named_args.get("BLOCK"))
    single = kwargs.get("SINGLE", named_args.get("SINGLE"))

    def fits(c):
        rows, tile = c.kwargs["ROWS"], c.kwargs["ROWS"] * block
        return ((rows == 1 or single) and tile <= max(block, 8192) and 4 <= tile // (32 * c.num_warps) <= 32)

    kept = [c for c in configs if fits(c)]
    return kept or [min(configs, key=lambda c: (c.kwargs["ROWS"], c.num_warps))]



def tuned_rows(key: tuple[str, ...] = ("n_cols",)):
    """triton.autotune over (ROWS, num_warps), keyed by the row length (and, implicitly, the dtypes). The CPU
    interpreter gets one config with ROWS=2, so the tests exercise the row masks."""
    if INTERPRETED:
        configs = [triton.Config({"ROWS": 2}, num_warps=4)]
    else:
        configs = [triton.Config({"ROWS": r}, num_warps=w) for r in (1, 2, 4, 8, 16) for w in (1, 2, 4, 8, 16, 32)]
    return triton.autotune(configs=configs, key=list(key), prune_configs_by={"early_config_prune": _sensible},
                           do_bench=quick_bench)


def row_grid(n_rows: int):
    return lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)


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
