"""RMSNorm forward and backward in Triton: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps).

Forward reads x and w and writes y (and, when a backward follows, rstd), the row length compiled in: rows up
to 8K wide in registers, wider ones up to 16K one a program in 4K chunks, two passes as torch.compile's kernel
makes them, longer ones (dim 65536 and beyond) in 16K chunks, twice. Backward writes dx and reduces dw through
per-program fp32 partial rows ([programs, dim]) summed afterwards, so no atomics are needed.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._rows import (as_rows, check_backward, output_rows, reduction_programs, row_block, row_grid, row_passes,
                           sum_partials, tuned_rows)


@triton.jit
def _rmsnorm_fwd_tile(X, W, Y, RSTD, tile, stride_x, stride_y, n_rows, n_cols, eps, BLOCK: tl.constexpr,
                      ROWS: tl.constexpr):
    """Rows [tile * ROWS, tile * ROWS + ROWS) held in registers as one [ROWS, BLOCK] tile."""
    rows = tile * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols[None, :] < n_cols)
    rows64 = rows.to(tl.int64)[:, None]  # 64-bit: rows * stride can pass 2^31
    x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)  # [ROWS]
    w = tl.load(W + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows64 * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    if RSTD is not None:  # None: no backward follows (see rmsnorm_fwd)
        tl.store(RSTD + rows, rstd, mask=row_ok)


@triton.jit
def _rmsnorm_fwd_chunked(X, W, Y, RSTD, tile, stride_x, stride_y, n_rows, n_cols, eps, C: tl.constexpr,
                         ROWS: tl.constexpr):
    """Rows [tile * ROWS, tile * ROWS + ROWS) in C-wide chunks: the sum of squares, then the output (the second
    pass hits L2): rows longer than a block."""
    rows = tile * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    rows64 = rows.to(tl.int64)[:, None]
    acc = tl.zeros([ROWS, C], dtype=tl.float32)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        mask = row_ok[:, None] & (cols < n_cols)[None, :]
        x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, axis=1) / n_cols + eps)  # [ROWS]
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        col_ok = cols < n_cols
        mask = row_ok[:, None] & col_ok[None, :]
        x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + rows64 * stride_y + cols[None, :], (x * rstd[:, None] * w[None, :]).to(Y.dtype.element_ty),
                 mask=mask)
    if RSTD is not None:  # None: no backward follows (see rmsnorm_fwd)
        tl.store(RSTD + rows, rstd, mask=row_ok)


@triton.jit
def _rmsnorm_fwd_passes(X, W, Y, RSTD, row, stride_x, stride_y, n_cols: tl.constexpr, eps, C: tl.constexpr):
    """One row in C-wide chunks, two passes over it as torch.compile's kernel makes them: the sum of squares
    (x read with evict_last, so the second pass finds it in L2), then the output (x with evict_first). On an
    H200 (session 19, bf16, against Inductor's kernel, both timed by bench.timing): 257 us at 16384 x 16384
    against compile's 260 and the whole row in registers' 261; with a runtime row length 257, without the hints
    265."""
    row = row.to(tl.int64)
    x_row = X + row * stride_x
    acc = tl.zeros([C], dtype=tl.float32)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, 0) / n_cols + eps)
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        ok = cols < n_cols
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + row * stride_y + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=ok)
    if RSTD is not None:
        tl.store(RSTD + row, rstd)


@tuned_rows()
@triton.jit
def _rmsnorm_fwd_kernel(X, W, Y, RSTD, stride_x, stride_y, n_rows, n_cols: tl.constexpr, eps, BLOCK: tl.constexpr,
                        SINGLE: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr, PASSES: tl.constexpr):
    """The row length is a constexpr, as in layernorm's forward."""
    if PASSES:  # one row a program (grid: the rows), in four chunks a block; ROWS and STAGES do not apply
        _rmsnorm_fwd_passes(X, W, Y, RSTD, tl.program_id(0), stride_x, stride_y, n_cols, eps, BLOCK // 4)
    elif SINGLE and STAGES == 1:  # one tile a program (straight-line code: a loop of one cost 30%)
        _rmsnorm_fwd_tile(X, W, Y, RSTD, tl.program_id(0), stride_x, stride_y, n_rows, n_cols, eps, BLOCK, ROWS)
    elif SINGLE:  # tiles program, program + programs, ... pipelined (see row_grid)
        for tile in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
            _rmsnorm_fwd_tile(X, W, Y, RSTD, tile, stride_x, stride_y, n_rows, n_cols, eps, BLOCK, ROWS)
    else:  # rows longer than a block, a block-wide chunk at a time
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            _rmsnorm_fwd_chunked(X, W, Y, RSTD, tile, stride_x, stride_y, n_rows, n_cols, eps, BLOCK, ROWS)


@triton.jit
def _rmsnorm_bwd_chunked(X, W, DY, RSTD, DX, dw_ptr, stride_x, stride_dy, stride_dx, first, last, n_cols,
                         C: tl.constexpr, ROWS: tl.constexpr):
    """Rows [first, last) ROWS at a time in C-wide chunks: the sums over the rows, then dx and the dw partial row
    (this program's own, in global memory, read and written once per ROWS rows) in a second pass that hits L2."""
    for start in range(0, n_cols, C):
        cols = start + tl.arange(0, C)
        tl.store(dw_ptr + cols, tl.zeros([C], dtype=tl.float32), mask=cols < n_cols)
    for row0 in range(first, last, ROWS):
        rows = row0 + tl.arange(0, ROWS)
        row_ok = rows < last
        rows64 = rows.to(tl.int64)[:, None]
        rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)  # [ROWS]
        acc = tl.zeros([ROWS, C], dtype=tl.float32)
        for start in range(0, n_cols, C):
            cols = start + tl.arange(0, C)
            mask = row_ok[:, None] & (cols < n_cols)[None, :]
            x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            acc += dy * w[None, :] * x
        c = tl.sum(acc, axis=1) / n_cols  # [ROWS]
        for start in range(0, n_cols, C):
            cols = start + tl.arange(0, C)
            col_ok = cols < n_cols
            mask = row_ok[:, None] & col_ok[None, :]
            x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
            dx = rstd[:, None] * (dy * w[None, :] - x * (rstd * rstd * c)[:, None])
            tl.store(DX + rows64 * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
            dw = tl.load(dw_ptr + cols, mask=col_ok, other=0.0)
            tl.store(dw_ptr + cols, dw + tl.sum(dy * x * rstd[:, None], axis=0), mask=col_ok)


@tuned_rows(wide_stages=True)
@triton.jit
def _rmsnorm_bwd_kernel(X, W, DY, RSTD, DX, DW_PARTIAL, stride_x, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr,
                        rows_per_program, BLOCK: tl.constexpr, SINGLE: tl.constexpr, ROWS: tl.constexpr,
                        STAGES: tl.constexpr):
    """Program p of P writes partial row p of dw over its rows: rows that fit a block in tiles of ROWS rows p,
    p + P, p + 2P, ... (the programs together sweep x, dy and dx front to back, a band of P tiles at a time, as
    an elementwise kernel does), longer rows as rows_per_program contiguous ones. The interleaved walk against
    each program's own contiguous range, on an H200 (session 26, explore63, bf16, the autotuner's configs, three
    rounds): 34.2-34.8 against 35.4-36.0 us at 4096 x 4096, 107.5-108.0 against 111.4-111.9 at 16384 x 4096,
    393.1-393.3 against 409.6-410.1 at 65536 x 4096, 111.0-111.3 against 113.8-114.1 at 4096 x 16384, the same
    at 1024 x 16384 and 16384 x 768. (Layernorm's SPLIT, two programs a row range each owning half the columns,
    was offered here too; on an H200, bf16, session 16, the autotuner kept this loop at every 16K-wide point,
    1024 x 16384 included.) Its 16K-wide row loop may be pipelined too
    (wide_stages): the autotuner took that at 16 warps at 1024 and 4096 rows (bench, session 21: 38 and 116 us)
    and the unpipelined loop at 32 warps at 16384 and 65536 rows. x and dy brought in by TMA instead (tensor
    descriptors, a row one [dim / 256, 256] box, the loop pipelined by Triton; session 26, explore60, bf16): at
    4096 x 4096 35.6 against 35.4-35.9 us (layernorm's the same way 36.9 against 37.5-38.0), at 16384 x 4096
    the same, at 16K-wide rows 1.5x (rmsnorm) to 5x (layernorm) slower: the [64, 256] tiles spill. Nor was one
    program an SM in Gluon with a ring of 2-4 tiles in shared memory, filled by TMA or cp.async while the tile
    before is reduced (H200, session 35, explore101-103, bf16): at best 51.6-51.7 against 37.1-37.6 us at
    1024 x 16384 (the tile held in registers spills; read from shared memory twice in chunks it does not, and
    took 52.4-55.7) and 37.1-37.6 against 34.1-34.7 at 4096 x 4096. Nor were two-row tiles at 4096-wide rows,
    which the autotuner's prune does not offer (H200, session 40, explore110, the row kernel alone, three rounds):
    32.5-32.6 us at 8 warps and 3 stages, as the autotuner's pick (one row, 8 warps, 3 stages), 35.1-48.2 at
    16 warps or 1 stage. Nor were rows handed out at run time from a ticket counter, the next one or two rows' x
    and dy loaded into registers by hand (H200, session 41, explore113, the whole backward, three rounds): 39.4-44.5
    us at 4096 x 4096 against the library's 34.2-34.6 (the same hand-loaded walk over fixed rows: 34.2-34.7 at
    best); at 16K-wide rows the hand-loaded rows spill (59-484 us against 37.2-37.8)."""
    pid = tl.program_id(0)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    dw_ptr = DW_PARTIAL + pid.to(tl.int64) * n_cols
    if SINGLE:  # walk tiles pid, pid + programs, ... ROWS rows each, the dw partial in registers
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n_cols
        dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for tile in tl.range(pid, tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
            rows = tile * ROWS + tl.arange(0, ROWS)
            row_ok = rows < n_rows
            mask = row_ok[:, None] & col_ok[None, :]
            rows64 = rows.to(tl.int64)[:, None]
            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)  # [ROWS]
            xhat = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32) * rstd[:, None]
            dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dw += dy * xhat  # the partial first, so dy dies into g (registers are the limit at 16K-wide rows)
            g = dy * tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]  # w from L1 each step
            c = tl.sum(g * xhat, axis=1) / n_cols
            dx = rstd[:, None] * (g - xhat * c[:, None])
            tl.store(DX + rows64 * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        tl.store(dw_ptr + cols, tl.sum(dw, axis=0), mask=col_ok)
    else:  # rows longer than a block, a block-wide chunk at a time
        _rmsnorm_bwd_chunked(X, W, DY, RSTD, DX, dw_ptr, stride_x, stride_dy, stride_dx, first, last, n_cols,
                             BLOCK, ROWS)


def rmsnorm_fwd(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6,
                out: torch.Tensor | None = None, stats: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """y, rstd for x [..., dim] and w [dim]; writes into `out` when given. Without `stats` (no backward follows)
    rstd is neither written nor returned (None), as in layernorm_fwd."""
    x2 = as_rows(x)  # [rows, dim]
    if w.shape != (x.shape[-1],):
        raise ValueError(f"weight shape {tuple(w.shape)} does not match x's last dim {x.shape[-1]}")
    n_rows, n_cols = x2.shape
    y, y2 = output_rows(x, out)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device) if stats else None  # [rows]
    block, single = row_block(n_cols)
    if n_rows:
        passes = row_passes(block, single)
        grid = (n_rows,) if passes else row_grid(n_rows, x.device)
        _rmsnorm_fwd_kernel[grid](x2, w, y2, rstd, x2.stride(0), y2.stride(0), n_rows, n_cols, eps, BLOCK=block,
                                  SINGLE=single, PASSES=passes)
    return y, rstd


def rmsnorm_bwd(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """dx, dw for the forward above."""
    x2, dy2 = as_rows(x), as_rows(dy)
    check_backward(dy, x, w, (rstd,))
    n_rows, n_cols = x2.shape
    dx = torch.empty_like(x2)
    block, single = row_block(n_cols)
    programs, rows_per_program = reduction_programs(n_rows, block, x.device)
    dw_partial = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)  # [1, programs, dim]
    if n_rows:
        _rmsnorm_bwd_kernel[(programs,)](x2, w, dy2, rstd, dx, dw_partial, x2.stride(0), dy2.stride(0),
                                         dx.stride(0), n_rows, n_cols, rows_per_program,
                                         BLOCK=block, SINGLE=single)
    else:
        dw_partial.zero_()
    return dx.view_as(x), sum_partials(dw_partial, w.dtype)[0]


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        y, rstd = rmsnorm_fwd(x, w, eps)
        ctx.save_for_backward(x, w, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, rstd = ctx.saved_tensors
        dx, dw = rmsnorm_bwd(dy, x, w, rstd)
        return dx, dw, None


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None) -> torch.Tensor:
    """Differentiable RMSNorm; with `out` (no grad) the result is written there."""
    if out is not None or not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)):
        return rmsnorm_fwd(x, w, eps, out, stats=False)[0]
    return RMSNormFunction.apply(x, w, eps)
