"""Row-wise softmax over the last dim in Triton, forward and backward.

Forward reads x once and writes y (rows that fit one block stay in registers; longer rows keep a running max
and rescaled sum in one pass, then write exp(x - max) / sum in a second, which hits L2; too few long rows to fill
the GPU are split into segments, each a program, their statistics merged per row). Backward reads y and dy and
writes dx = y * (dy - sum(dy * y)).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._rows import (MAX_BLOCK, SCALAR_STATS, as_rows, check_backward, dependent_kwargs, gdc_wait, output_rows,
                           row_block, row_grid, sm_count, tuned_rows)


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
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]  # one division a row, not an element (see _span_softmax)
    tl.store(Y + rows64 * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


GROUP = tl.constexpr(8)  # elements of a row a thread reduces alone in _softmax_fwd_row (one 16-byte bf16 load)
ROW_PATH_BLOCK = tl.constexpr(MAX_BLOCK)  # rows in blocks this wide take _softmax_fwd_row


@triton.jit
def _max_sum(m1, s1, m2, s2):
    """Two (max, sum of exp(x - max)) pairs merged into one (their maxes finite, see _softmax_fwd_row)."""
    m = tl.maximum(m1, m2)
    return m, s1 * tl.exp(m1 - m) + s2 * tl.exp(m2 - m)


@triton.jit
def _softmax_fwd_row(X, Y, row, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    """One row held in registers as [BLOCK / GROUP, GROUP]: each group's max and sum of exp(x - group max) taken
    within its thread, then one block reduction merges the groups' pairs, where the tile takes two (the max, then
    the sum), each a shared-memory round trip and a barrier; y = exp(x - group max) * exp(group max - row max) /
    sum, still one exp an element (and one a group). For 16K-wide rows, one program an SM at 16 warps, where
    nothing else on the SM runs while a row is reduced. On an H200 (session 30, explore80, bf16, three rounds)
    21.5-21.6 us against the tile's 22.2-23.2 at 1024 x 16384 (a copy: 19.0-20.5), but slower at 4096 x 4096
    (20.9 against 20.6) and 2048 x 8192 (21.9 against 21.3); in the norms suite (session 30 against 28) 22.3
    against 22.9 us at 1024 x 16384, 70.5 against 72.6 at 4096, 264.3 against 270.2 at 16384, 1,035 against
    1,074 at 65536 rows."""
    offs = tl.arange(0, BLOCK // GROUP)[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = offs < n_cols
    row = row.to(tl.int64)
    x = tl.load(X + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    group_max = tl.maximum(tl.max(x, axis=1), -3.0e38)  # groups of only -inf: a finite max, a sum of 0
    e = tl.exp(x - group_max[:, None])
    row_max, total = tl.reduce((group_max, tl.sum(e, axis=1)), 0, _max_sum)
    scale = tl.exp(group_max - row_max) * (1.0 / total)
    tl.store(Y + row * stride_y + offs, (e * scale[:, None]).to(Y.dtype.element_ty), mask=mask)


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


@triton.jit
def _merge_max_sum(m, s):
    """One (max, sum of exp(x - max)) from lanes (or segments) holding their own; those that saw only -inf
    count zero (no inf - inf)."""
    row_max = tl.max(m, axis=0)
    return row_max, tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)


@triton.jit
def _span_max_sum(x_ptr, lo, hi, C: tl.constexpr, STAGES: tl.constexpr, SCALAR: tl.constexpr):
    """(max, sum of exp(x - max)) over columns [lo, hi) of one row, C at a time: a running max and rescaled sum
    per lane, merged at the end (two exps an element), or (SCALAR) one running pair, each chunk reduced as it
    comes (one exp an element and a block reduction a chunk, 2C fewer registers). The first of two reads of x:
    evict_last, so the second (_span_softmax) finds it in L2."""
    if SCALAR:
        row_max = tl.full([], -float("inf"), dtype=tl.float32)
        total = tl.zeros([], dtype=tl.float32)
        for start in tl.range(lo, hi, C, num_stages=STAGES):  # STAGES > 1: the next chunks load meanwhile
            cols = start + tl.arange(0, C)
            x = tl.load(x_ptr + cols, mask=cols < hi, other=-float("inf"), eviction_policy="evict_last")
            x = x.to(tl.float32)
            m_new = tl.maximum(row_max, tl.max(x, axis=0))
            seen = m_new > -float("inf")  # only -inf so far: nothing to add (and no inf - inf)
            total = tl.where(seen, total * tl.exp(row_max - m_new) + tl.sum(tl.exp(x - m_new), axis=0), 0.0)
            row_max = m_new
        return row_max, total
    m = tl.full([C], -float("inf"), dtype=tl.float32)  # running max per lane
    s = tl.zeros([C], dtype=tl.float32)  # running sum per lane, scaled to m
    for start in tl.range(lo, hi, C, num_stages=STAGES):  # STAGES > 1: the next chunks load meanwhile
        cols = start + tl.arange(0, C)
        x = tl.load(x_ptr + cols, mask=cols < hi, other=-float("inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        scale = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))  # lanes with only -inf: no inf - inf
        s = s * scale + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    return _merge_max_sum(m, s)


@triton.jit
def _span_softmax(x_ptr, y_ptr, lo, hi, row_max, total, C: tl.constexpr, STAGES: tl.constexpr):
    """y = exp(x - row_max) / total over columns [lo, hi) of one row: the second read of x (evict_first, its
    last use), times 1 / total (a division an element cost 2-3% at 16K-wide rows, session 24). y stored
    evict_first or streaming (.cs) instead, so that L2 keeps x for this read, was no faster (H200, session 33,
    explore93, bf16, three rounds): 25.79-25.92 us at 256 x 65536 against the library's 25.57 (the same kernel
    with a plain store: 26.08-26.11), 30.9-31.5 at 64 x 262144 against 31.2-31.5."""
    inv = 1.0 / total
    for start in tl.range(lo, hi, C, num_stages=STAGES):  # STAGES > 1: the next chunks load meanwhile
        cols = start + tl.arange(0, C)
        mask = cols < hi
        x = tl.load(x_ptr + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + cols, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _span_dot(y_ptr, dy_ptr, lo, hi, C: tl.constexpr, STAGES: tl.constexpr, SCALAR: tl.constexpr):
    """sum(y * dy) over columns [lo, hi) of one row: a sum per lane, or (SCALAR) each chunk reduced as it comes.
    The first of two reads of y and dy (evict_last: _span_dx reads them again)."""
    if SCALAR:
        total = tl.zeros([], dtype=tl.float32)
        for start in tl.range(lo, hi, C, num_stages=STAGES):  # STAGES > 1: the next chunks load meanwhile
            cols = start + tl.arange(0, C)
            mask = cols < hi
            y = tl.load(y_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            dy = tl.load(dy_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            total += tl.sum(y * dy, axis=0)
        return total
    acc = tl.zeros([C], dtype=tl.float32)
    for start in tl.range(lo, hi, C, num_stages=STAGES):  # STAGES > 1: the next chunks load meanwhile
        cols = start + tl.arange(0, C)
        mask = cols < hi
        y = tl.load(y_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        dy = tl.load(dy_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += y * dy
    return tl.sum(acc, axis=0)


@triton.jit
def _span_dx(y_ptr, dy_ptr, dx_ptr, lo, hi, dot, C: tl.constexpr, STAGES: tl.constexpr):
    """dx = y * (dy - dot) over columns [lo, hi) of one row: the second read of y and dy (evict_first)."""
    for start in tl.range(lo, hi, C, num_stages=STAGES):  # STAGES > 1: the next chunks load meanwhile
        cols = start + tl.arange(0, C)
        mask = cols < hi
        y = tl.load(y_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(dx_ptr + cols, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_fwd_rows(X, Y, tile, stride_x, stride_y, n_rows, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr,
                      STAGES: tl.constexpr, SCALAR: tl.constexpr):
    """Rows [tile * ROWS, tile * ROWS + ROWS), longer than a block, one at a time: running max and sum, then the
    output (the second pass hits L2). Called once a program when the grid is the tiles: inside a loop over tiles
    (as the pipelined configs need) it took 128 registers and spilled at 16 warps (118 without the loop, sm_90
    offline), and on an H200 (session 24, explore47, 256 x 65536, bf16) 31.6 us against 25.6. A 64K-wide bf16
    row held whole in registers as loaded, x read once, was slower still (session 32, explore87, three rounds):
    37.3 us at 32 warps (64 registers a thread, 34 spilled) against 25.7 at 256 x 65536, and without spills 30.9
    against 25.2 at 512 x 32768. Held over a cluster of 2-8 CTAs instead (num_ctas, Hopper), it compiles with
    Triton 3.9 offline without spills, but Triton 3.6 fails to compile it at every cluster size ("parent layout
    must have at least rank >= 2", session 33, explore94). Nor was a row held whole in shared memory, one program
    an SM (Gluon: every chunk of the row loaded at once by TMA, the statistics taken as chunks arrive, y written in
    place and stored by TMA while the next row loads; H200, session 42, explore115, bf16, three rounds): at best
    33.4 us against 25.4 at 256 x 65536, 18.2 against 17.5-17.8 at 128 x 65536, 26.5 against 25.2 at 512 x 32768;
    at 4 warps 134-162 us: most likely the work on each chunk, not DRAM, sets its pace (not measured)."""
    for i in range(ROWS):
        row = tile * ROWS + i
        if row < n_rows:
            x_ptr = X + row.to(tl.int64) * stride_x
            row_max, total = _span_max_sum(x_ptr, 0, n_cols, BLOCK, STAGES, SCALAR)
            _span_softmax(x_ptr, Y + row.to(tl.int64) * stride_y, 0, n_cols, row_max, total, BLOCK, STAGES)


@triton.jit
def _softmax_bwd_rows(Y, DY, DX, tile, stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK: tl.constexpr,
                      ROWS: tl.constexpr, STAGES: tl.constexpr, SCALAR: tl.constexpr):
    """Rows longer than a block, one at a time: sum(y * dy), then dx (the second pass hits L2); as
    _softmax_fwd_rows."""
    for i in range(ROWS):
        row = tile * ROWS + i
        if row < n_rows:
            y_ptr = Y + row.to(tl.int64) * stride_y
            dy_ptr = DY + row.to(tl.int64) * stride_dy
            dot = _span_dot(y_ptr, dy_ptr, 0, n_cols, BLOCK, STAGES, SCALAR)
            _span_dx(y_ptr, dy_ptr, DX + row.to(tl.int64) * stride_dx, 0, n_cols, dot, BLOCK, STAGES)


@tuned_rows(long_stages=True, option=SCALAR_STATS)
@triton.jit
def _softmax_fwd_kernel(X, Y, stride_x, stride_y, n_rows, n_cols: tl.constexpr, BLOCK: tl.constexpr,
                        SINGLE: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr, SCALAR: tl.constexpr):
    if SINGLE and STAGES == 1 and ROWS == 1 and BLOCK >= ROW_PATH_BLOCK:  # 16K-wide rows (see _softmax_fwd_row)
        _softmax_fwd_row(X, Y, tl.program_id(0), stride_x, stride_y, n_cols, BLOCK)
    elif SINGLE and STAGES == 1:  # one [ROWS, BLOCK] tile a program, in registers
        _softmax_fwd_tile(X, Y, tl.program_id(0), stride_x, stride_y, n_rows, n_cols, BLOCK, ROWS)
    elif SINGLE:  # tiles program, program + programs, ... pipelined (see row_grid)
        for tile in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
            _softmax_fwd_tile(X, Y, tile, stride_x, stride_y, n_rows, n_cols, BLOCK, ROWS)
    elif STAGES == 1:  # long rows, one tile a program (see _softmax_fwd_rows)
        _softmax_fwd_rows(X, Y, tl.program_id(0), stride_x, stride_y, n_rows, n_cols, BLOCK, ROWS, STAGES, SCALAR)
    else:  # long rows, tiles program, program + programs, ..., their chunk loops pipelined
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            _softmax_fwd_rows(X, Y, tile, stride_x, stride_y, n_rows, n_cols, BLOCK, ROWS, STAGES, SCALAR)


@tuned_rows(long_stages=True, option=SCALAR_STATS)
@triton.jit
def _softmax_bwd_kernel(Y, DY, DX, stride_y, stride_dy, stride_dx, n_rows, n_cols: tl.constexpr, BLOCK: tl.constexpr,
                        SINGLE: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr, SCALAR: tl.constexpr):
    if SINGLE and STAGES == 1:  # tiles as in the forward
        _softmax_bwd_tile(Y, DY, DX, tl.program_id(0), stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK, ROWS)
    elif SINGLE:
        for tile in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
            _softmax_bwd_tile(Y, DY, DX, tile, stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK, ROWS)
    elif STAGES == 1:  # long rows, as in the forward
        _softmax_bwd_rows(Y, DY, DX, tl.program_id(0), stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK, ROWS,
                          STAGES, SCALAR)
    else:
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            _softmax_bwd_rows(Y, DY, DX, tile, stride_y, stride_dy, stride_dx, n_rows, n_cols, BLOCK, ROWS, STAGES,
                              SCALAR)


SPLIT_CHUNK = 4096  # columns a split program loads at once (8 warps: 16 a thread; the statistics' 4: 32)
SPLIT_PROGRAMS_PER_SM = 32  # split long rows until rows x segments fills this many programs an SM (64 x 262144:
# 4K segments; on an H200, session 24, explore46, backward 46.3 us against 48.0 with 8, the 16K segments before)
SPLIT_BELOW_ROWS_PER_SM = 1  # ... but only when the rows give fewer programs than this an SM: the split reads
# x (or y, dy) a second time in another kernel, from L2 only while it fits there; one program a row re-reads
# each row while it is still in L2. On an H200 (session 15) 256 x 65536 ran fastest unsplit (33.5 us forward
# against 39-47 split in 2..16) and 64 x 262144 split in 8 or 16 (39 us against 54 unsplit)


@triton.jit
def _softmax_seg_stats_kernel(X, SEG_MAX, SEG_SUM, stride_x, n_cols, seg_len, n_segs, C: tl.constexpr):
    """Program (row, segment): the segment's max and sum of exp(x - max) ([rows, segments] fp32 each), a scalar
    pair (one exp an element; a segment is usually one chunk). On an H200 (session 24, 64 x 262144, bf16) 13.5 us
    for this kernel against 19.0 with a pair a lane and 16K-column segments."""
    row, seg = tl.program_id(0), tl.program_id(1)
    lo = seg * seg_len
    seg_max, seg_sum = _span_max_sum(X + row.to(tl.int64) * stride_x, lo, tl.minimum(lo + seg_len, n_cols), C, 1,
                                     True)
    tl.store(SEG_MAX + row * n_segs + seg, seg_max)
    tl.store(SEG_SUM + row * n_segs + seg, seg_sum)


@triton.jit
def _softmax_seg_out_kernel(X, Y, SEG_MAX, SEG_SUM, stride_x, stride_y, n_cols, seg_len, n_segs, C: tl.constexpr,
                            SEGS: tl.constexpr, WAIT: tl.constexpr):
    """Program (row, segment): the row's max and sum from its segments' (SEGS >= n_segs), then this segment's
    exp(x - max) / sum. Programs take (row, segment) in the reverse of the statistics kernel's launch order, so
    the first to re-read x read what that kernel read last, the likeliest still in L2. With WAIT (a dependent
    launch, see kernels._rows.dependent_launch) it first waits for the statistics kernel."""
    if WAIT:
        gdc_wait()
    row, seg = tl.num_programs(0) - 1 - tl.program_id(0), tl.num_programs(1) - 1 - tl.program_id(1)
    k = tl.arange(0, SEGS)
    maxes = tl.load(SEG_MAX + row * n_segs + k, mask=k < n_segs, other=-float("inf"))
    sums = tl.load(SEG_SUM + row * n_segs + k, mask=k < n_segs, other=0.0)
    row_max, total = _merge_max_sum(maxes, sums)
    lo = seg * seg_len
    _span_softmax(X + row.to(tl.int64) * stride_x, Y + row.to(tl.int64) * stride_y, lo,
                  tl.minimum(lo + seg_len, n_cols), row_max, total, C, 1)


@triton.jit
def _softmax_seg_dot_kernel(Y, DY, SEG_DOT, stride_y, stride_dy, n_cols, seg_len, n_segs, C: tl.constexpr):
    """Program (row, segment): the segment's sum of y * dy."""
    row, seg = tl.program_id(0), tl.program_id(1)
    lo = seg * seg_len
    dot = _span_dot(Y + row.to(tl.int64) * stride_y, DY + row.to(tl.int64) * stride_dy, lo,
                    tl.minimum(lo + seg_len, n_cols), C, 1, False)
    tl.store(SEG_DOT + row * n_segs + seg, dot)


@triton.jit
def _softmax_seg_dx_kernel(Y, DY, DX, SEG_DOT, stride_y, stride_dy, stride_dx, n_cols, seg_len, n_segs,
                           C: tl.constexpr, SEGS: tl.constexpr, WAIT: tl.constexpr):
    """Program (row, segment): the row's sum of y * dy from its segments', then this segment's dx (in the reverse
    of the dot kernel's order, as the forward's output kernel; with WAIT, after the dot kernel has finished)."""
    if WAIT:
        gdc_wait()
    row, seg = tl.num_programs(0) - 1 - tl.program_id(0), tl.num_programs(1) - 1 - tl.program_id(1)
    k = tl.arange(0, SEGS)
    dot = tl.sum(tl.load(SEG_DOT + row * n_segs + k, mask=k < n_segs, other=0.0), axis=0)
    lo = seg * seg_len
    _span_dx(Y + row.to(tl.int64) * stride_y, DY + row.to(tl.int64) * stride_dy, DX + row.to(tl.int64) * stride_dx,
             lo, tl.minimum(lo + seg_len, n_cols), dot, C, 1)


def row_segments(n_rows: int, n_cols: int, device: torch.device, chunk: int = SPLIT_CHUNK) -> tuple[int, int]:
    """(segments a row, columns a segment, a multiple of `chunk`) for rows longer than a block. Few long rows
    (256 x 65536: 256 programs on 132 SMs, each walking 64K columns a chunk at a time) leave SMs with one chunk's
    loads in flight; split into segments, rows x segments fill SPLIT_PROGRAMS_PER_SM programs an SM (up to one
    chunk a segment: 64 x 262144 takes 64 segments of 4096). (1, n_cols) when the rows alone do, or give
    SPLIT_BELOW_ROWS_PER_SM programs an SM. Two kernels, so x is read twice. One kernel whose programs hold their
    segment in registers and wait, spinning on a per-row arrival counter, for the row's other segments' (max,
    sum) was tried on an H200 (session 22, bf16): 32.3 us at best against 38.7 at 64 x 262144 (then; 31.1 since
    session 24's statistics kernel; a copy of the same bytes: 18.4-20.2), slower at 256 x 65536 (31.3 against
    28.9, unsplit) and 1024 x 16384 (29.4 against 23.0); not adopted: waiting programs hold their SM's slots,
    correctness rests on a row's programs being resident together, and the CPU interpreter, running programs one
    at a time, would hang. Nor, in one kernel with nothing shared, S programs a row that each take the whole row's
    max and sum themselves, then write their own segment (H200, session 40, explore111, bf16, S = 2 or 4, three
    rounds): at best 34.5 us against 25.5 at 256 x 65536, 51.9 against 31.5 at 64 x 262144, 21.1 against
    17.6-18.2 at 128 x 65536."""
    sms = sm_count(device)
    want = SPLIT_PROGRAMS_PER_SM * sms
    if n_cols <= MAX_BLOCK or n_rows >= SPLIT_BELOW_ROWS_PER_SM * sms:
        return 1, n_cols
    segs = min(triton.cdiv(want, n_rows), triton.cdiv(n_cols, chunk))
    seg_len = triton.cdiv(triton.cdiv(n_cols, segs), chunk) * chunk
    return triton.cdiv(n_cols, seg_len), seg_len


def softmax_fwd(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    x2 = as_rows(x)  # [rows, dim]
    n_rows, n_cols = x2.shape
    y, y2 = output_rows(x, out)
    block, single = row_block(n_cols)
    segs, seg_len = row_segments(n_rows, n_cols, x.device)
    if n_rows and n_cols and segs > 1:  # few long rows: each split over several programs (two kernels)
        seg_max = torch.empty(n_rows, segs, dtype=torch.float32, device=x.device)  # [rows, segments]
        seg_sum = torch.empty_like(seg_max)
        _softmax_seg_stats_kernel[(n_rows, segs)](x2, seg_max, seg_sum, x2.stride(0), n_cols, seg_len, segs,
                                                  C=SPLIT_CHUNK, num_warps=4)
        _softmax_seg_out_kernel[(n_rows, segs)](x2, y2, seg_max, seg_sum, x2.stride(0), y2.stride(0), n_cols,
                                                seg_len, segs, C=SPLIT_CHUNK, SEGS=triton.next_power_of_2(segs),
                                                num_warps=8, **dependent_kwargs(x.device))
    elif n_rows and n_cols:
        grid = row_grid(n_rows, x.device)
        _softmax_fwd_kernel[grid](x2, y2, x2.stride(0), y2.stride(0), n_rows, n_cols, BLOCK=block, SINGLE=single)
    return y


def softmax_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    y2, dy2 = as_rows(y), as_rows(dy)
    check_backward(dy, y)
    n_rows, n_cols = y2.shape
    dx = torch.empty_like(y2)
    block, single = row_block(n_cols)
    segs, seg_len = row_segments(n_rows, n_cols, y.device)
    if n_rows and n_cols and segs > 1:  # few long rows, split as in the forward
        seg_dot = torch.empty(n_rows, segs, dtype=torch.float32, device=y.device)  # [rows, segments]
        _softmax_seg_dot_kernel[(n_rows, segs)](y2, dy2, seg_dot, y2.stride(0), dy2.stride(0), n_cols, seg_len, segs,
                                                C=SPLIT_CHUNK, num_warps=8)
        _softmax_seg_dx_kernel[(n_rows, segs)](y2, dy2, dx, seg_dot, y2.stride(0), dy2.stride(0), dx.stride(0),
                                               n_cols, seg_len, segs, C=SPLIT_CHUNK, SEGS=triton.next_power_of_2(segs),
                                               num_warps=8, **dependent_kwargs(y.device))
    elif n_rows and n_cols:
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
