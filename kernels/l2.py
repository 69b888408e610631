"""The L2 reset before each cold sample: afterwards L2 holds only `buf` (twice L2's size), dirty and at normal
eviction priority, whatever ran before. Zeroing buf alone (as nvbench and triton.testing.do_bench flush) does not
evict lines that a kernel loaded with evict_last, nor reset a line's priority, so the next "cold" call would read
those bytes from L2. Here buf is first loaded with evict_last (claiming every evict_last slot), then each of its
128-byte lines is given evict_normal (PTX applypriority, sm_80 and later), then it is zeroed.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

LINE = 128  # bytes in an L2 line


@triton.jit
def _claim_kernel(BUF, n, BLOCK: tl.constexpr):
    """Loads BLOCK int32 of BUF with evict_last and stores their sum in the first, so the loads stay (BUF is zeroed
    next)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(BUF + offs, mask=offs < n, other=0, eviction_policy="evict_last")
    tl.store(BUF + tl.program_id(0).to(tl.int64) * BLOCK, tl.sum(v, 0))


@triton.jit
def _demote_kernel(BUF, n_lines, LINES: tl.constexpr, INTS_PER_LINE: tl.constexpr):
    """applypriority.global.L2::evict_normal on LINES lines of BUF (the last line repeated past the end)."""
    line = tl.minimum(tl.program_id(0).to(tl.int64) * LINES + tl.arange(0, LINES), n_lines - 1)
    tl.inline_asm_elementwise("applypriority.global.L2::evict_normal [$1], 128;\n\tmov.u32 $0, 0;", "=r,l",
                              [BUF + line * INTS_PER_LINE], dtype=tl.int32, is_pure=False, pack=1)


def priorities_supported(device: torch.device) -> bool:
    """Whether the device has L2 eviction priorities to reset (NVIDIA, compute capability 8.0 or later)."""
    return device.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(device) >= (8, 0)


def reset_l2(buf: torch.Tensor, priorities: bool = True) -> None:
    """Claim, demote, zero (see the module docstring); `priorities=False` only zeroes (devices without priorities).
    buf: int32, contiguous, its size a multiple of a line."""
    if buf.dtype != torch.int32 or not buf.is_contiguous() or buf.numel() * 4 % LINE:
        raise ValueError("reset_l2 needs a contiguous int32 buffer whose size is a multiple of 128 bytes")
    n = buf.numel()
    if priorities and n:
        _claim_kernel[(triton.cdiv(n, 4096),)](buf, n, BLOCK=4096)
        n_lines = n * 4 // LINE
        _demote_kernel[(triton.cdiv(n_lines, 1024),)](buf, n_lines, LINES=1024, INTS_PER_LINE=LINE // 4)
    buf.zero_()
