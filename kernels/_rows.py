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
    """Autotune prune, from a sweep of every (ROWS, warps, STAGES) on an H200 (rmsnorm, bf16, 768..16384 wide):
    the best configs held 16 or 32 elements of the tile per thread, tiles of at most 4K elements (or one row),
    several rows per tile only when a row fits one block, and software pipelining (STAGES 3, a persistent
    loop) only where a stage's tile is small enough to buffer (at 16K-wide rows it lost)."""
    block = kwargs.get("BLOCK", named_args.get("BLOCK"))
    single = kwargs.get("SINGLE", named_args.get("SINGLE"))

    def fits(c):
        rows, warps, stages, chunk = c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"], c.kwargs.get("CHUNK", 0)
        if chunk:  # 16K-wide rows, and longer ones, walked in chunks narrower than a block, 1 or 2 rows at a time
            return block > 8192 and rows <= 2 and stages == 1 and rows * chunk // (32 * warps) in (16, 32)
        tile = rows * block
        return ((rows == 1 or single) and tile <= max(block, 4096) and tile // (32 * warps) in (16, 32)
                and (stages == 1 or (single and tile <= 8192)))

    kept = [c for c in configs if fits(c)]
    return kept or [min(configs, key=lambda c: (c.kwargs.get("CHUNK", 0), c.kwargs["ROWS"], c.num_warps,
                                                c.kwargs["STAGES"]))]


def tuned_rows(key: tuple[str, ...] = ("n_cols", "n_rows"), chunks: bool = False):
    """triton.autotune over (ROWS, num_warps, STAGES), keyed by the shape (and, implicitly, the dtypes). With
    `chunks` (the norms), rows of 16K and more may also be walked in CHUNK-wide pieces (two passes, the second
    from L2) instead of held whole or in 16K chunks. Backward, whole 16K rows spill (rmsnorm compiled for sm_90:
    288 B of stack a thread at 16 warps, 120 at 32) and 4K chunks do not (110 registers at 8 warps); forward,
    whole rows do not spill but take a whole SM each (101-110 registers at 16 warps), chunks 58-88 at 8. The CPU
    interpreter gets one config, ROWS=2 and STAGES=3, so the tests exercise the row masks and the persistent
    loops (tests/test_row_kernels.py launches the other paths)."""
    if INTERPRETED:
        configs = [triton.Config({"ROWS": 2, "STAGES": 3, **({"CHUNK": 0} if chunks else {})}, num_warps=4)]
    else:
        configs = gpu_configs(chunks)
    return triton.autotune(configs=configs, key=list(key), prune_configs_by={"early_config_prune": _sensible},
                           do_bench=quick_bench)


def gpu_configs(chunks: bool) -> list:
    """Every (ROWS, num_warps, STAGES) the autotuner may try on a GPU (before `_sensible` prunes them per shape);
    with `chunks`, also (ROWS, CHUNK) pairs: two rows a step halve the dw/db partials' read-modify-write traffic
    in L2, which at 16K-wide rows is larger than the rows' own."""
    extra = {"CHUNK": 0} if chunks else {}
    configs = [triton.Config({"ROWS": r, "STAGES": s, **extra}, num_warps=w)
               for r in (1, 2, 4, 8, 16) for w in (1, 2, 4, 8, 16, 32) for s in (1, 3)]
    if chunks:
        configs += [triton.Config({"ROWS": r, "STAGES": 1, "CHUNK": c}, num_warps=w)
                    for r, c in ((1, 4096), (2, 2048), (2, 4096)) for w in (4, 8, 16)]
    return configs


PERSISTENT_PER_SM = 4  # programs per SM of the pipelined (STAGES > 1) row-parallel kernels


def sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def row_grid(n_rows: int, device: torch.device):
    """One program per tile of ROWS rows; pipelined configs (STAGES > 1) loop over tiles in a grid of a few
    programs per SM instead, so the next tile's loads are in flight while this one computes."""
    sms = sm_count(device)

    def grid(meta):
        tiles = triton.cdiv(n_rows, meta["ROWS"])
        return (tiles if meta["STAGES"] == 1 else min(tiles, PERSISTENT_PER_SM * sms),)

    return grid


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """x [..., dim] as a 2-D [rows, dim] view with unit stride along dim (copied only if needed)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    return x.reshape(-1, x.shape[-1])


def reduction_programs(n_rows: int, device: torch.device, per_sm: int = 4) -> tuple[int, int]:
    """(programs, rows per program) for backward kernels that reduce dw/db through per-program partial rows.
    Up to four programs per SM, but at least 16 rows each once every SM has one, so the [programs, dim] fp32
    partials stay small next to the rows themselves (at 1024 x 16384 they were a third of the traffic)."""
    sms = sm_count(device)
    programs = max(1, min(n_rows, per_sm * sms, max(sms, n_rows // 16)))
    rows_per_program = triton.cdiv(n_rows, programs) if n_rows else 1
    return (triton.cdiv(n_rows, rows_per_program) if n_rows else 1), rows_per_program
