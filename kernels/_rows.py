"""Launch helpers shared by the row-wise kernels (rmsnorm, layernorm, softmax).

Each kernel takes a tile of ROWS rows x BLOCK columns per step: short rows (dim 768) are packed several to a
program so every program moves enough bytes, long rows get one program (forward) or one step (backward) each.
ROWS and num_warps are autotuned per row length and dtype.
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from kernels._autotune import INTERPRETED, check_dtype, quick_bench

MAX_BLOCK = 16384  # elements of a row held in registers at once; longer rows are walked in chunks of this size


def row_block(n_cols: int) -> tuple[int, bool]:
    """(BLOCK, whether a row fits one block) for rows of n_cols elements."""
    block = min(triton.next_power_of_2(max(n_cols, 1)), MAX_BLOCK)
    return block, n_cols <= block


def _sensible(configs, named_args, long_stages=False, wide_stages=False, option=None, passes_warps=None, **kwargs):
    """Autotune prune, from a sweep of every (ROWS, warps, STAGES) on an H200 (rmsnorm, bf16, 768..16384 wide):
    the best configs held 16 or 32 elements of the tile per thread, tiles of at most 4K elements (or one row),
    several rows per tile only when a row fits one block, and software pipelining (STAGES 3, a persistent
    loop) only where a stage's tile is small enough to buffer (at 16K-wide rows it lost, but see `wide_stages`
    and split_columns). Walking 16K-wide rows in 2K or 4K chunks (two passes, the second from L2), one or two
    rows a step, lost to whole rows by 15-50% forward and backward (session 15, rmsnorm and layernorm,
    1024..65536 rows, the row length a runtime value): rows that fit a block are held whole (but see
    row_passes). With `long_stages` (softmax), rows longer than a block may also pipeline their chunk loops;
    with `wide_stages` (rmsnorm's backward) one 16K-wide row a step may pipeline its row loop too; a kernel's
    `option` is tried on only where it applies. A launch with SPLIT (layernorm's backward, see split_columns)
    gives each program half of every row: the rules count that half as its tile. With `passes_warps` (a function
    of the launch's arguments), a launch with PASSES (see row_passes) gets that many warps, untuned."""
    block = kwargs.get("BLOCK", named_args.get("BLOCK"))
    single = kwargs.get("SINGLE", named_args.get("SINGLE"))
    parts = 2 if kwargs.get("SPLIT", named_args.get("SPLIT")) else 1

    def fits(c):
        rows, warps, stages = c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"]
        tile, whole = rows * block // parts, block // parts  # a program's tile, and the columns of a row it holds
        if option and c.kwargs[option.name] and not option.applies(block, single, stages):
            return False
        return ((rows == 1 or single) and tile <= max(whole, 4096) and tile // (32 * warps) in (16, 32)
                and (stages == 1 or (single and tile <= 8192) or (long_stages and not single)
                     or (wide_stages and single and block >= MAX_BLOCK)))

    kept = [c for c in configs if fits(c)]
    if passes_warps and kwargs.get("PASSES", named_args.get("PASSES")):
        warps = passes_warps({**named_args, **kwargs})
        kept = [c for c in kept if c.num_warps == warps]
    return kept or [min(configs, key=lambda c: (c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"]))]


class Option:
    """A kernel's boolean constexpr the autotuner tries both ways, where applies(BLOCK, SINGLE, STAGES) holds."""

    def __init__(self, name: str, applies):
        self.name, self.applies = name, applies


# softmax: rows longer than a block keep their running max and sum as scalars (a block reduction a chunk) instead
# of a lane each (2 x BLOCK registers' worth): two programs an SM instead of one
SCALAR_STATS = Option("SCALAR", lambda block, single, stages: not single)


def row_passes(block: int, single: bool) -> bool:
    """Whether the norm forwards walk each row, one a program, in passes over block/4-wide chunks (two for
    rmsnorm, three for layernorm, as torch.compile's kernels do) instead of holding it whole: rows wider than 8K
    that fit a block. On an H200 (session 19, bf16, timed by bench.timing) layernorm took 258 against 276 us at
    16384 x 16384, 70 against 78 at 4096 x 16384, 1016 against 1071 at 65536 x 16384, 23 against 27 at
    1024 x 16384. A fixed choice, not the autotuner's: offered both ways, its shorter timing took the whole row at
    1024 x 16384 (24.4 against 23.9 us) and the bench then read 25.7. The autotuner still picks rmsnorm's warps (the
    prune leaves one row a program, unpipelined, at 16 or 32 warps for these rows); layernorm's are fixed at 16
    (see _layernorm_fwd_kernel)."""
    return single and block >= MAX_BLOCK


def split_columns(block: int, single: bool) -> bool:
    """Whether layernorm's backward gives each row range two programs, each owning half the columns (and reading
    the other half for the row sums): rows that fit a 16K block, where one whole row a step is more than the
    registers hold (H200, session 16). A fixed choice, as row_passes: the autotuner took it at every 16K-wide
    point while it was offered both ways (sessions 18-21), and fixed, the row ranges can be laid out for it (see
    reduction_programs)."""
    return single and block >= MAX_BLOCK


def tuned_rows(key: tuple[str, ...] = ("n_cols", "n_rows"), long_stages: bool = False, wide_stages: bool = False,
               option: Option | None = None, passes_warps=None):
    """triton.autotune over (ROWS, num_warps, STAGES), keyed by the shape (and, implicitly, the dtypes); STAGES
    pipelines the loop over rows that fit a block, and with `long_stages` the chunk loops of longer rows; an
    `option` is tried on and off where it applies. The CPU interpreter gets one config, ROWS=2, STAGES=3 and the
    option off, so the tests exercise the row masks and the persistent loops (tests/test_row_kernels.py launches
    the other paths)."""
    if INTERPRETED:
        configs = [triton.Config({"ROWS": 2, "STAGES": 3, **({option.name: False} if option else {})}, num_warps=4)]
    else:
        configs = gpu_configs(option)
    prune = functools.partial(_sensible, long_stages=long_stages, wide_stages=wide_stages, option=option,
                              passes_warps=passes_warps)
    return triton.autotune(configs=configs, key=list(key), prune_configs_by={"early_config_prune": prune},
                           do_bench=quick_bench)


def gpu_configs(option: Option | None = None) -> list:
    """Every (ROWS, num_warps, STAGES[, option]) the autotuner may try on a GPU (before `_sensible` prunes them
    per shape). Other pipeline depths did not beat its picks in the norm backwards at 32 MiB (H200, session 33,
    explore96, bf16): STAGES 2 was 20-60% slower, 4 and 5 no faster at 4096 x 4096, and at 16K-wide rows 4 is
    over the shared memory."""
    return [triton.Config({"ROWS": r, "STAGES": s, **({option.name: on} if option else {})}, num_warps=w)
            for r in (1, 2, 4, 8, 16) for w in (1, 2, 4, 8, 16, 32) for s in (1, 3)
            for on in ((False, True) if option else (False,))]


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
    """x [..., dim] as a 2-D [rows, dim] view with unit stride along dim (copied only if needed); x of a dtype
    the kernels take (check_dtype)."""
    check_dtype(x)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension, the rows' length")
    if x.stride(-1) != 1:
        x = x.contiguous()
    return x.reshape(-1, x.shape[-1])


def check_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor | None = None,
                   stats: tuple[torch.Tensor, ...] = ()) -> None:
    """A backward launcher's inputs agree: dy has the shape of the forward's input (or output) x, w one value a
    column and each saved statistic one a row. The kernels index them all by x's rows and columns, so a mismatch
    would read past the end of the shorter."""
    if dy.shape != x.shape:
        raise ValueError(f"dy has shape {tuple(dy.shape)}, the forward's {tuple(x.shape)}")
    if w is not None and w.shape != (x.shape[-1],):
        raise ValueError(f"weight shape {tuple(w.shape)} does not match x's last dim {x.shape[-1]}")
    rows = math.prod(x.shape[:-1])
    for s in stats:
        if s.numel() != rows:
            raise ValueError(f"a saved statistic has {s.numel()} values for {rows} rows")


def output_rows(x: torch.Tensor, out: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, y as [rows, dim]) for a row-wise forward: `out` when given (contiguous, x's shape), else a new
    contiguous tensor whatever x's layout (empty_like would keep a permuted x's strides)."""
    y = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.shape != x.shape or not y.is_contiguous():
        raise ValueError("out must be contiguous with the shape of x")
    return y, y.view(-1, x.shape[-1])


def reduction_programs(n_rows: int, block: int, device: torch.device, split: bool = False) -> tuple[int, int]:
    """(programs, rows per program) for backward kernels that reduce dw/db through per-program partial rows of
    `block`-wide tiles. Up to four programs per SM at rows up to 2K wide, two up to 8K, one at 16K (each a
    [programs, dim] fp32 partial row to write and sum), but at least 16 rows each once every SM has one, so the
    partials stay small next to the rows themselves (at 1024 x 16384 they were a third of the traffic). At least
    32 rows each cost 10% at 4096 x 4096 (rmsnorm, H200: one program an SM of 4 or 8 warps hides less latency).
    Per SM, measured on an H200 (session 21, bf16, both norms, autotuned for each): at 16K-wide rows one program
    against four, rmsnorm 415 against 437 us at 16384 rows, 118 against 125 at 4096, layernorm 552 against 629
    and 164 against 187; at 4096-wide two, layernorm 423 against 439 at 65536 rows; at 768-wide four (two: 2-7%
    slower, one: 23-34%). With `split` (see split_columns) each row range takes two programs, one resident an SM
    (197 KB of shared memory), so half a range an SM: one wave of programs instead of two, and half the partial
    rows. Measured on an H200 (session 22, layernorm, bf16, autotuned for each) against a range an SM: 45.3
    against 58.6 us at 1024 x 16384, 139.4 against 152.6 at 4096 rows, 495.5 against 509.8 at 16384, 1,913
    against 1,929 at 65536. Measured again with the kernels of session 33 (explore95, bf16, the whole backward,
    each count autotuned): at 4096 x 4096, 132-198 programs were 15-25% slower than these 256, 264 tied, 396 was
    2% (rmsnorm) and 23% (layernorm) slower; at 1024 x 16384 fewer programs were slower (rmsnorm 39.2 us at 88
    against 37.0-37.6 at 132, layernorm 44.1 at 60 row ranges against 40.7-41.4 at 66). Again in session 40
    (explore112, rmsnorm at 4096 x 4096, 4 or 8 warps, 1-4 stages, three rounds): the whole backward took
    34.3-34.7 us at best at 256 programs (the library: 34.4-34.8), 34.6-35.1 at 264, 35.1-35.6 at 396, 36.7-37.1 at
    528 and 41.5-41.9 at 1056; an add on the same grids ran 29.6-31.2 against torch.add's 28.7."""
    sms = sm_count(device)
    if split:
        programs = max(1, min(n_rows, sms // 2))
    else:
        per_sm = 1 if block >= MAX_BLOCK else 2 if block >= 4096 else 4
        programs = max(1, min(n_rows, per_sm * sms, max(sms, n_rows // 16)))
    rows_per_program = triton.cdiv(n_rows, programs) if n_rows else 1
    return (triton.cdiv(n_rows, rows_per_program) if n_rows else 1), rows_per_program


DEPENDENT_LAUNCH = True  # explore scripts turn it off to measure without


def dependent_launch(device: torch.device) -> bool:
    """Whether a kernel that only consumes the previous kernel's output (the norm backwards' partial-row sum,
    the split softmax's second kernel) is launched as a programmatic dependent launch (PDL): on a Hopper or newer
    GPU, compiled (the CPU interpreter has no grid dependency control). Its programs are then scheduled while the
    kernel before runs and wait in gdc_wait until that kernel has finished and its writes are visible, instead of
    the launch being processed only once it has finished. On an H200 (session 23, bf16, explore40) the norm
    backwards took 0.4-2.6 us less at every point measured, 1024 x 768 to 16384 x 16384 (rmsnorm 36.1 against
    37.7 us at 4096 x 4096, 36.2-36.6 against 37.9-38.7 at 1024 x 16384; layernorm 37.1-37.3 against 38.6-39.5,
    44.1 against 45.6-45.8). Letting it be scheduled from the start of the kernel before (gdc_launch_dependents
    there) was slower at 16K-wide rows (rmsnorm 40.1 us at 1024 x 16384): its waiting programs take the SMs'
    room. Measured again in session 33 (explore98, bf16, three rounds): at the start 2-7% slower at 4096 x 4096
    and 1024 x 16384 for layernorm and at 1024 x 16384 for rmsnorm; after the row loop, before the partial rows
    are stored, within the spread of not at all (rmsnorm 34.43-34.50 against 34.50-34.91 us at 4096 x 4096)."""
    return (DEPENDENT_LAUNCH and not INTERPRETED and device.type == "cuda"
            and torch.cuda.get_device_capability(device)[0] >= 9)


def dependent_kwargs(device: torch.device) -> dict:
    """Launch keywords for a kernel with a WAIT constexpr that consumes the previous kernel's output: launched
    as a dependent, and waiting in gdc_wait, where dependent_launch holds."""
    pdl = dependent_launch(device)
    return {"WAIT": pdl, "launch_pdl": pdl}


@triton.jit
def _sum_partials_kernel(PARTIALS, OUT, n_programs, n_cols, BN: tl.constexpr, BP: tl.constexpr,
                         WAIT: tl.constexpr):
    """Program (column block, k): OUT[k, cols] = sum over programs of PARTIALS[k, programs, cols], in OUT's dtype.
    With WAIT (a dependent launch) it first waits for the kernel that wrote PARTIALS."""
    if WAIT:
        gdc_wait()
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    k = tl.program_id(1).to(tl.int64)
    base = PARTIALS + k * n_programs * n_cols
    acc = tl.zeros([BP, BN], dtype=tl.float32)
    for p0 in range(0, n_programs, BP):
        progs = p0 + tl.arange(0, BP)
        mask = (progs < n_programs)[:, None] & (cols < n_cols)[None, :]
        acc += tl.load(base + progs.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(OUT + k * n_cols + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=cols < n_cols)


SUM_STEP_ROWS = 1024  # partial rows sum_partials takes in one step at most


def sum_tiling(n_programs: int, n_cols: int) -> tuple[int, int, int]:
    """(BN, BP, warps) for sum_partials: every partial row in one step (up to SUM_STEP_ROWS), BN columns a
    program so that a program sums 1024 elements a warp at 8 warps, or 4096 at 4 warps for rows of a 16K block
    (64 columns a program up to 256 partial rows), 8 to 64 columns.
    Summed in steps of 64 or 256 rows before (session 37, explore105-107, H200, bf16, the whole backward, three
    rounds), the sum cost 7.8-8.1 us at 3960 and 4092 x 4096 (233 and 241 partial rows: four steps) against 2.4 at
    4096 x 4096 (256: one), and 5.7-5.9 at 924 and 1056 x 16384 (132: three) against 3.3 at 1024 x 16384 (128: two).
    In one step, against in steps (explore107 and 107b, each pair from one run): rmsnorm 34.6-35.1 against
    40.0-40.6 us at 4092 x 4096, 35.5-36.0 against 37.1 at 924 x 16384, 15.4-15.9 against 16.0-16.4 at
    1024 x 4096, 27.7-28.2 against 28.4-28.7 at 16384 x 768, 83.3-83.4 against 83.9-84.3 at 65536 x 768; layernorm
    36.0-36.5 against 41.6-42.2, 38.4-38.9 against 39.4, 16.5-17.0 against 16.9-17.4, 28.7-29.2 against 29.5-29.7,
    86.1-86.4 against 86.6-86.9. The same tiling at 4096 x 4096. At 16K-wide rows its first form, 1024 elements a
    warp ([128, 32] tiles at 128 partial rows), was slower for rmsnorm (37.4-38.0 against 37.0-37.5 us at
    1024 x 16384, 111.8-112.1 against 110.8-111.1 at 4096 x 16384); 64 columns a program won that back (session 38,
    explore108, three rounds on one machine: 36.9-37.4 against 37.3-37.8, and 37.4-37.5 in steps, at 1024 x 16384;
    111.1-111.6 against 111.7-112.5, and 111.2-111.5; 34.7-35.2 against 34.9-35.4 at 924 x 16384; layernorm the
    same or faster). The warps (explore106): at 16K-wide rows 8 (twice the columns a
    program) were slower for layernorm (42.8-43.4 against 41.2 us at 1024 x 16384), at 4096-wide rows 4 were slower
    for both (rmsnorm 35.5-35.9 against 34.9 at 4092 x 4096); why, was not measured."""
    bp = min(triton.next_power_of_2(max(n_programs, 1)), SUM_STEP_ROWS)
    wide = row_block(n_cols)[0] >= MAX_BLOCK
    warps, per_warp = (4, 4096) if wide else (8, 1024)
    bn = min(max(warps * per_warp // bp, 8), 64, triton.next_power_of_2(max(n_cols, 1)))
    return bn, bp, warps


def sum_partials(partials: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[k, programs, dim] fp32 partial rows summed over programs into [k, dim] of `dtype`, one launch (the norm
    backwards' dw, and db: torch's sum then a cast took two launches per partial), tiled by sum_tiling. Earlier
    tilings, on an H200 (the whole backward, bf16): tiles of 4096 elements, a program an SM, took rmsnorm 40.2 us
    at 4096 x 4096 against 36.9 with 32 columns a program (session 22; a first version with 256 columns a program
    left three programs walking 528 partial rows at dim 768: 139 against 96 us); at 16K-wide rows 64 x 64 tiles took
    3.2 us against 4.2 for tiles of 4096 (session 24, explore49); other tilings of 256 and 128 partial rows were no
    faster than 32 or 64 columns a program (session 32, explore90). Launched as a dependent of the backward kernel
    where it can be (see dependent_launch). Summed inside the backward kernel instead, after a grid barrier (a
    cooperative launch, each program then summing a slice of columns over every partial row), the backward was
    slower at every point (H200, session 26, explore59, bf16): rmsnorm 38.2 against 35.8-36.3 us at 4096 x 4096
    and 41.3 against 37.7-37.9 at 1024 x 16384, layernorm 38.8 against 37.4-38.1 and 44.5-44.8 against
    41.0-41.4. Nor was adding each program's dw (db) row by atomics into one zeroed fp32 row, the last program
    writing dw (H200, session 41, explore114, bf16, three rounds, against a copy of the row kernel ending in partial
    rows and this sum): relaxed 4-wide atomics took rmsnorm 36.2-36.5 against 34.9-35.0 us at 4096 x 4096 and
    42.4 against 41.2-41.9 at 1024 x 16384, layernorm 37.1-37.2 against 36.0-36.1 at 4096 x 4096; acq_rel ones
    2.5-8.7 us more at the same programs and warps. The partial rows stay fp32: stored in bf16 (w bf16, the same
    kernels and sum; H200, session 43, explore116, three rounds) they saved 0-1.9 us (rmsnorm 33.95-34.46 against
    34.08-34.53 us at 4096 x 4096, 35.4-35.9 against 36.8-37.2 at 1024 x 16384; layernorm 35.0-35.3 against
    36.0-36.2 and a tie at 1024 x 16384; 1-2% at 16384 x 4096), for dw's relative rms error 1.4x larger against
    float64 (2.4e-3 against 1.7e-3); more programs, their partial rows cheaper so, were slower still."""
    k, n_programs, n_cols = partials.shape
    out = torch.empty(k, n_cols, dtype=dtype, device=partials.device)
    if n_cols:
        bn, bp, warps = sum_tiling(n_programs, n_cols)
        _sum_partials_kernel[(triton.cdiv(n_cols, bn), k)](partials, out, n_programs, n_cols, BN=bn, BP=bp,
                                                            num_warps=warps, **dependent_kwargs(partials.device))
    return out
