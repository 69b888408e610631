"""Matrix product C = A @ B in Triton, with grouped tile order for L2 reuse and autotuned tiles.

Any M, N, K (masked edges) and any strides, so the backward (dA = dC @ B^T, dB = A^T @ dC) reuses the same
kernel on transposed views. Accumulates in fp32; `precision` picks tf32 or exact fp32 products for fp32 inputs.
At tf32 on Hopper the launcher first copies operands that are not K-major (`_k_major`). Hopper's 16-bit and tf32
products go through tensor descriptors, one program an SM (`_matmul_tma_kernel`), where a descriptor can take each
operand (BENCH_MATMUL_TMA=0 keeps them on the pointer kernel).
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from kernels._autotune import INTERPRETED, check_dtype
from kernels._rows import sm_count

# Hopper's 16-bit and tf32 products through _matmul_tma_kernel unless BENCH_MATMUL_TMA=0. Through this launcher on an
# H100 (session 65, baselines/h100/s65), against the pointer kernel in the same process and cuBLAS, median us: bf16
# forward 4096^3 180.0 against 213.4 (cuBLAS 176.1), 8192^3 1,378.9 against 1,770.8 (1,486.0), 8192 x 11008 x 4096
# 921.6 against 1,246.6 (983.2); tf32 forward 4096^3 396.7 against 441.1 (342.8), 8192 x 11008 x 4096 2,129.6
# against 2,427.0 (2,356.6). In the matmul suite its Triton rows took 11-29% less time than session 64's (the pointer
# kernel, another H100; cuBLAS's rows the same within 5% but two) at 2048^3, 4096^3, 8192^3 and 8192 x 11008 x 4096;
# the same at 1024^3 and, but for its tf32 fwd_bwd, at 4095 x 4097 x 1000 (C's rows 4097 elements apart: no
# descriptor takes them).
TMA = os.environ.get("BENCH_MATMUL_TMA", "1") != "0"


# 4-byte operands' (tf32's) widest tiles: at 4 bytes an element the 64-deep ones need more shared memory than an SM
# has. At 2 bytes the autotuner does not see them (_prune), so bf16 keeps the configs its rows were measured with:
# offered them on an H100 (session 61, explore141), its picks moved by no more than its picks vary (8192^3 forward
# 1,892 us against 1,771 without them in one process, 1,676 in the suite's run after).
_WIDE_4_BYTE = [triton.Config({"BM": bm, "BN": bn, "BK": 32, "GROUP": 8}, num_warps=8, num_stages=3)
                for bm, bn in ((128, 256), (256, 128))]


def _prune(configs, named_args, **_):
    if named_args["A"].element_size() == 4:
        return configs
    return [c for c in configs if c not in _WIDE_4_BYTE] or configs


def _configs():
    if INTERPRETED:  # the CPU interpreter: one small config, no tuning
        return [triton.Config({"BM": 32, "BN": 32, "BK": 32, "GROUP": 4}, num_warps=4, num_stages=1)]
    return [
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, num_warps=8, num_stages=3),
        triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP": 8}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, num_warps=4, num_stages=4),
        *_WIDE_4_BYTE,
        triton.Config({"BM": 128, "BN": 128, "BK": 32, "GROUP": 8}, num_warps=4, num_stages=4),
        triton.Config({"BM": 64, "BN": 128, "BK": 32, "GROUP": 8}, num_warps=4, num_stages=4),
        triton.Config({"BM": 128, "BN": 64, "BK": 32, "GROUP": 8}, num_warps=4, num_stages=4),
        triton.Config({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, num_warps=4, num_stages=5),
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K", "PRECISION"], prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _matmul_kernel(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   PRECISION: tl.constexpr, UPCAST: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    # Grouped order: GROUP row-tiles share the B columns they read while those are still in L2.
    per_group = GROUP * grid_n
    group = pid // per_group
    first_m = group * GROUP
    size_m = tl.minimum(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak  # [BM, BK]
    b_ptr = B + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn  # [BK, BN]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptr, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptr += BK * stride_ak
        b_ptr += BK * stride_bk
    c_ptr = C + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptr, acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _tma_configs():
    if INTERPRETED:
        return [triton.Config({"BM": 32, "BN": 32, "BK": 32, "GROUP": 4}, num_warps=4, num_stages=1,
                              pre_hook=_tma_blocks)]
    shapes = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4),
              (128, 128, 64, 8, 4), (128, 256, 32, 8, 3), (256, 128, 32, 8, 3), (128, 128, 32, 4, 4),
              (128, 128, 32, 8, 4)]
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_warps=w, num_stages=s, pre_hook=_tma_blocks)
            for bm, bn, bk, w, s in shapes]


def _tma_blocks(nargs):
    """The descriptors' boxes for the config about to run (a config's tiles are its descriptors' block shapes)."""
    bm, bn, bk = nargs["BM"], nargs["BN"], nargs["BK"]
    nargs["a_desc"].block_shape = [bk, bm] if nargs["A_T"] else [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_T"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // 2]


def _tma_prune(configs, named_args, **_):
    """32-deep tiles for 4-byte operands, 64-deep for 2-byte ones (the same shared memory a stage)."""
    deep = 32 if named_args["a_desc"].base.element_size() == 4 else 64
    return [c for c in configs if c.kwargs["BK"] == deep] or configs


@triton.autotune(configs=_tma_configs(), key=["M", "N", "K", "PRECISION", "A_T", "B_T"],
                 prune_configs_by={"early_config_prune": _tma_prune})
@triton.jit
def _matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, A_T: tl.constexpr, B_T: tl.constexpr, PRECISION: tl.constexpr,
                       UPCAST: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       GROUP: tl.constexpr):
    """The same product with tiles loaded and C stored through tensor descriptors (TMA), one program an SM walking
    the tiles in _matmul_kernel's grouped order. A is stored [M, K] or (A_T) [K, M], B [K, N] or (B_T) [N, K].
    The same kernel with device-side descriptors, each config alone, against the pointer launcher, on
    an H100 (session 64, explore144, baselines/h100/s64/): 4096^3 bf16 forward 184.1 against 214.9 us (cuBLAS
    179.2), 8192^3 1,501 against 1,774 (1,559), 8192 x 11008 x 4096 1,005 against 1,219 (1,036), dB = A^T @ dC
    at 4096^3 184.2 against 212.5 (180.5); tf32 4096^3 358.4 against 492.6 (352.4), 8192 x 11008 x 4096 2,101
    against 2,542 (2,322). One program a tile through descriptors took 4-10% more than one an SM at those
    points (196.1 us at 4096^3 bf16), and one program an SM through pointer loads 2-4x the launcher's time."""
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP * grid_n
    for tile in tl.range(tl.program_id(0), grid_m * grid_n, tl.num_programs(0), flatten=True):
        first_m = (tile // per_group) * GROUP
        size_m = tl.minimum(grid_m - first_m, GROUP)
        om = (first_m + (tile % per_group) % size_m) * BM
        on = ((tile % per_group) // size_m) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            if A_T:
                a = a_desc.load([k * BK, om]).T
            else:
                a = a_desc.load([om, k * BK])
            if B_T:
                b = b_desc.load([on, k * BK]).T
            else:
                b = b_desc.load([k * BK, on])
            if UPCAST:
                a, b = a.to(tl.float32), b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        # C stored in two halves, each through half the shared memory a whole tile would take
        c0, c1 = tl.split(tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
        c_desc.store([om, on], c0.to(c_desc.dtype))
        c_desc.store([om, on + BN // 2], c1.to(c_desc.dtype))


def _wgmma(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9


def _tma(a: torch.Tensor, precision: str) -> bool:
    """Whether the product of a and its like goes through _matmul_tma_kernel: with TMA on, on Hopper, for 16-bit
    operands and tf32 (exact fp32 products keep the pointer kernel)."""
    return TMA and _wgmma(a.device) and (a.element_size() == 2 or precision == "tf32")


def _stored(t: torch.Tensor) -> tuple[bool, int] | None:
    """(whether 2-D t is stored transposed, the stride between its stored rows) when a tensor descriptor can take it
    (one dim contiguous, the other's stride and the base 16-byte aligned), else None."""
    if t.stride(1) == 1 and t.stride(0) * t.element_size() % 16 == 0:
        transposed, lead = False, t.stride(0)
    elif t.stride(0) == 1 and t.stride(1) * t.element_size() % 16 == 0:
        transposed, lead = True, t.stride(1)
    else:
        return None
    return (transposed, lead) if t.data_ptr() % 16 == 0 else None


def _descriptor(t: torch.Tensor, transposed: bool, lead: int):
    """A descriptor of t's storage as it lies in memory (its box set per config, _tma_blocks)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows, cols = (t.shape[1], t.shape[0]) if transposed else t.shape
    return TensorDescriptor(t, [rows, cols], [lead, 1], [16, 16])


@triton.jit
def _transpose_kernel(T, OUT, R, C, stride_tr, stride_tc, stride_o, BR: tl.constexpr, BC: tl.constexpr):
    """OUT[c, r] = T[r, c] for T [R, C] at any strides, OUT's rows stride_o apart; a BR x BC tile a program."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (r[:, None] < R) & (c[None, :] < C)
    tile = tl.load(T + r[:, None].to(tl.int64) * stride_tr + c[None, :] * stride_tc, mask=mask)
    tl.store(OUT + c[None, :].to(tl.int64) * stride_o + r[:, None], tile, mask=mask)


def _k_major(t: torch.Tensor, k_dim: int) -> torch.Tensor:
    """t (2-D) with dim k_dim, the reduction's, contiguous and the other dim's stride a multiple of 16 elements: t if
    it is so, else a copy into such a buffer (rows padded, the padding never read). Hopper's wgmma takes tf32
    operands from shared memory K-major only (PTX transposes 16-bit ones alone), so Triton transposes any other
    while copying it in, 4 bytes a cp.async instead of 16: compiled for sm_90 (Triton 3.9, 128 x 128 x 32 tiles,
    4 warps, 4 stages) a row-major B takes 128 four-byte copies a thread a tile where a K-major one takes 32
    sixteen-byte ones, and A^T with a row-major B (the backward's dB = A^T @ dC) 256; rows at a stride Triton
    cannot prove a multiple of 16 get the 4-byte copies too. On an H100 (session 61, explore141, tf32, against the
    kernel on the operands as they came): 4096^3 forward 579 against 1,608 us, dB 716 against 2,803 (cuBLAS 349,
    539); 4095 x 4097 x 1000 forward 396 against 413, dB 417 against 433 (unpadded copies: 516).
    A transposing copy is _transpose_kernel's: torch's copy_ of the transposed view took 139.7 us for a 4096^2
    fp32 operand on an H100, the kernel 49.8 at 64 x 64 tiles (50.3 at 32 x 128, 51.1 at 128 x 32), and 129.2
    against 404.9 for B of 8192 x 11008 x 4096 (session 62, explore142)."""
    other = 1 - k_dim
    if t.stride(k_dim) == 1 and t.stride(other) % 16 == 0:
        return t
    k, n = t.shape[k_dim], t.shape[other]
    buf = torch.empty(n, triton.cdiv(k, 16) * 16, dtype=t.dtype, device=t.device)[:, :k]  # [other, k]
    if t.stride(k_dim) == 1:  # K-major already, its rows not aligned: a copy row for row
        buf.copy_(t if k_dim == 1 else t.t())
    else:
        src = t if k_dim == 0 else t.t()  # [k, other]
        _transpose_kernel[(triton.cdiv(k, 64), triton.cdiv(n, 64))](src, buf, k, n, src.stride(0), src.stride(1),
                                                                    buf.stride(0), BR=64, BC=64)
    return buf if k_dim == 1 else buf.t()


def matmul_fwd(a: torch.Tensor, b: torch.Tensor, precision: str = "ieee", out: torch.Tensor | None = None) -> torch.Tensor:
    """a [M, K] @ b [K, N] -> [M, N]; `precision` is "ieee" or "tf32" for fp32 inputs."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"dtypes differ: {a.dtype} and {b.dtype}")
    check_dtype(a)
    M, K = a.shape
    N = b.shape[1]
    c = out if out is not None else torch.empty(M, N, dtype=a.dtype, device=a.device)
    if c.shape != (M, N):
        raise ValueError(f"out has shape {tuple(c.shape)}, expected {(M, N)}")
    if a.dtype != torch.float32:
        precision = "ieee"  # bf16/fp16 products are exact on the tensor cores; the flag only matters for fp32
    elif precision == "tf32" and _wgmma(a.device):  # why: _k_major
        a, b = _k_major(a, 1), _k_major(b, 0)
    layouts = [_stored(t) for t in (a, b, c)] if _tma(a, precision) and M and N and K else [None]
    if all(layouts) and not layouts[2][0]:  # C row-major
        (a_t, a_lead), (b_t, b_lead), (_, c_lead) = layouts
        sms = sm_count(a.device)
        grid = lambda meta: (min(sms, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)
        descs = _descriptor(a, a_t, a_lead), _descriptor(b, b_t, b_lead), _descriptor(c, False, c_lead)
        _matmul_tma_kernel[grid](*descs, M, N, K, A_T=a_t, B_T=b_t, PRECISION=precision,
                                 UPCAST=INTERPRETED and a.dtype != torch.float32)
    elif M and N:
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
        _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1), PRECISION=precision, UPCAST=INTERPRETED and a.dtype != torch.float32)
    return c


class MatmulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, precision):
        ctx.save_for_backward(a, b)
        ctx.precision = precision
        return matmul_fwd(a, b, precision)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        da = matmul_fwd(dc, b.t(), ctx.precision) if ctx.needs_input_grad[0] else None
        db = matmul_fwd(a.t(), dc, ctx.precision) if ctx.needs_input_grad[1] else None
        return da, db, None


def matmul(a: torch.Tensor, b: torch.Tensor, precision: str = "ieee", out: torch.Tensor | None = None) -> torch.Tensor:
    if out is not None or not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return matmul_fwd(a, b, precision, out)
    return MatmulFunction.apply(a, b, precision)
