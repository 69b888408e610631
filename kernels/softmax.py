"""Row-wise softmax over the last dim in Triton, forward and backward.

Forward reads x once and writes y (rows that fit one block stay in registers; longer rows keep a running max
and rescaled sum in one pass, then write exp(x - max) / sum in a second, which hits L2). Backward reads y and
dy and writes dx = y * (dy - sum(dy * y)).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._rows import as_rows, row_block, row_grid, tuned_rows


@triton.jit
def _softmax_fwd_tile(X, Y, tile, stride_x, stride_y, n_rows, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tile * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)[:, None]  # 64-bit: rows * stride can pass 2^31
    x = tl.load(X + rows64 * stride_x + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    # rows past the end are all -inf: clamp their max so they give zeros (never stored), not NaN
    row_max = tl.maximum(tl.max(x, axis=1), -3.0e38)
    e = tl.exp(x - row_max[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(Y + rows64 * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_tile(Y, DY, DX, tile, stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK: tl.constexpr,
                      ROWS: tl.constexpr):
    rows = tile * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    y = tl.load(Y + rows64 * stride_y + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows64 * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=1)  # [ROWS]
    tl.store(DX + rows64 * stride_dx + cols[None, :], (y * (dy - dot[:, None])).to(DX.dtype.element_ty), mask=mask)


@tuned_rows()
@triton.jit
def _softmax_fwd_kernel(X, Y, stride_x, stride_y, n_rows, n_cols, BLOCK: tl.constexpr, SINGLE: tl.constexpr,
                        ROWS: tl.constexpr, STAGES: tl.constexpr):
    if SINGLE and STAGES == 1:  # one [ROWS, BLOCK] tile a program, in registers
        _softmax_fwd_tile(X, Y, tl.program_id(0), stride_x, stride_y, n_rows, n_cols, BLOCK, ROWS)
    elif SINGLE:  # tiles program, program + programs, ... pipelined (see row_grid)
        for tile in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
            _softmax_fwd_tile(X, Y, tile, stride_x, stride_y, n_rows, n_cols, BLOCK, ROWS)
    else:  # long rows, one at a time: running max and rescaled sum, then the output (second pass hits L2)
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            for i in range(ROWS):
                row = tile * ROWS + i
                if row < n_rows:
                    x_ptr = X + row.to(tl.int64) * stride_x
                    y_ptr = Y + row.to(tl.int64) * stride_y
                    m = tl.full([BLOCK], -float("inf"), dtype=tl.float32)  # running max per lane
                    s = tl.zeros([BLOCK], dtype=tl.float32)  # running sum per lane, scaled to m
                    for start in range(0, n_cols, BLOCK):
                        cols = start + tl.arange(0, BLOCK)
                        x = tl.load(x_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
                        m_new = tl.maximum(m, x)
                        # Lanes that have seen only -inf keep a zero sum (avoid inf - inf).
                        scale = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
                        s = s * scale + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
                        m = m_new
                    row_max = tl.max(m, axis=0)
                    total = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
                    for start in range(0, n_cols, BLOCK):
                        cols = start + tl.arange(0, BLOCK)
                        mask = cols < n_cols
                        x = tl.load(x_ptr + cols, mask=mask, other=-float("inf")).to(tl.float32)
                        tl.store(y_ptr + cols, (tl.exp(x - row_max) / total).to(Y.dtype.element_ty), mask=mask)


@tuned_rows()
@triton.jit
def _softmax_bwd_kernel(Y, DY, DX, stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK: tl.constexpr,
                        SINGLE: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr):
    if SINGLE and STAGES == 1:  # tiles as in the forward
        _softmax_bwd_tile(Y, DY, DX, tl.program_id(0), stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK, ROWS)
    elif SINGLE:
        for tile in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
            _softmax_bwd_tile(Y, DY, DX, tile, stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK, ROWS)
    else:
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            for i in range(ROWS):
                row = tile * ROWS + i
                if row < n_rows:
                    y_ptr = Y + row.to(tl.int64) * stride_y
                    dy_ptr = DY + row.to(tl.int64) * stride_dy
                    dx_ptr = DX + row.to(tl.int64) * stride_dx
                    acc = tl.zeros([BLOCK], dtype=tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        cols = start + tl.arange(0, BLOCK)
                        mask = cols < n_cols
                        y = tl.load(y_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                        dy = tl.load(dy_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                        acc += y * dy
                    dot = tl.sum(acc, axis=0)
                    for start in range(0, n_cols, BLOCK):
                        cols = start + tl.arange(0, BLOCK)
                        mask = cols < n_cols
                        y = tl.load(y_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                        dy = tl.load(dy_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                        tl.store(dx_ptr + cols, (y * (dy - dot)).to(DX.dtype.element_ty), mask=mask)


def softmax_fwd(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    x2 = as_rows(x)  # [rows, dim]
    n_rows, n_cols = x2.shape
    y = out if out is not None else torch.empty_like(x)
    if y.shape != x.shape or not y.is_contiguous():
        raise ValueError("out must be contiguous with the shape of x")
    y2 = y.view(-1, n_cols)
    block, single = row_block(n_cols)
    if n_rows and n_cols:
        grid = row_grid(n_rows, x.device)
        _softmax_fwd_kernel[grid](x2, y2, x2.stride(0), y2.stride(0), n_rows, n_cols, BLOCK=block, SINGLE=single)
    return y


def softmax_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    y2, dy2 = as_rows(y), as_rows(dy)
    n_rows, n_cols = y2.shape
    dx = torch.empty_like(y2)
    block, single = row_block(n_cols)
    if n_rows and n_cols:
        grid = row_grid(n_rows, y.device)
        _softmax_bwd_kernel[grid](y2, dy2, dx, y2.stride(0), dy2.stride(0), dx.stride(0), n_rows, n_cols,
                                  BLOCK=block, SINGLE=single)
    return dx.view_as(y)


class SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = softmax_fwd(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return softmax_bwd(dy, y)


def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    if out is not None or not (torch.is_grad_enabled() and x.requires_grad):
        return softmax_fwd(x, out)
    return SoftmaxFunction.apply(x)
