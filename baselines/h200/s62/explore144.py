"""Session 62: the Triton GEMM at bf16 reads 1.17-1.29x cuBLAS's time on an H100 (baselines/h100/s62/matmul.jsonl:
1.755 against 1.501 ms at 8192^3, 1.231 against 0.958 at 8192 x 11008 x 4096). The library's kernel loads its
tiles through pointers (cp.async, pipelined by Triton), one program a tile. Here, each config alone (no autotuner)
and through bench.timing, against the library's launcher (`library`; at 84cc84c through TMA descriptors, a path
taken back out before it ran on a GPU), its pointer kernel autotuned (`pointer`) and torch.matmul:
- `ptr_persist`: the same pointer loads, one program an SM walking tiles (tl.range flatten);
- `desc`: tiles loaded (and C stored) through tensor descriptors (TMA), one program a tile;
- `desc_persist`: descriptors, one program an SM (both descriptor variants store C in two halves).
Operands as the suite's calls have them: the forward's row-major A and B, the backward's dB = A^T @ dC (A stored
K x M: its tiles loaded [BK, BM] and transposed in the kernel), and tf32 on K-major copies (wgmma takes tf32
K-major only).

Run from the repository root (on a GPU; `baselines/h200/s62/run144.sh` runs it, then the matmul suite):
    python3 baselines/h200/s62/explore144.py OUT.jsonl [--brief | --micro]
--brief: cuBLAS, the launcher and the pointer kernel alone; --micro: the bf16 forward points, cuBLAS, the launcher
and MICRO's variants. On the CPU, every variant once against float64:
    TRITON_INTERPRET=1 python3 baselines/h200/s62/explore144.py --smoke
Not run on a GPU yet: session 62's device time went to machines that did not start.
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.getcwd(), "baselines", "h200", "s40"))

from _explore import begin, emit  # noqa: E402

from bench.timing import TimingConfig, time_call  # noqa: E402
from kernels import matmul as km  # noqa: E402

POINTS = [  # (dtype, site, M, N, K)
    ("bf16", "fwd", 4096, 4096, 4096), ("bf16", "fwd", 8192, 8192, 8192), ("bf16", "fwd", 8192, 11008, 4096),
    ("bf16", "dB", 4096, 4096, 4096), ("bf16", "dB", 8192, 11008, 4096),
    ("tf32", "fwd", 4096, 4096, 4096), ("tf32", "fwd", 8192, 11008, 4096),
]
CONFIGS = {  # (BM, BN, BK, warps, stages)
    "bf16": [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4)],
    "tf32": [(128, 256, 32, 8, 3), (128, 256, 32, 8, 4), (128, 128, 32, 4, 4)],
}

MICRO = [("desc_persist", (128, 256, 64, 8, 3, True)), ("desc_persist", (128, 256, 64, 8, 4, True)),
         ("ptr_persist", (128, 256, 64, 8, 3))]


@triton.jit
def _tile_of(tile, grid_m, grid_n, GROUP: tl.constexpr):
    per_group = GROUP * grid_n
    first_m = (tile // per_group) * GROUP
    size_m = tl.minimum(grid_m - first_m, GROUP)
    return first_m + (tile % per_group) % size_m, (tile % per_group) // size_m


@triton.jit
def _ptr_persist_kernel(A, B, C, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn, PROGRAMS, PRECISION: tl.constexpr,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    rk = tl.arange(0, BK)
    for tile in tl.range(tl.program_id(0), grid_m * grid_n, PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_of(tile, grid_m, grid_n, GROUP)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            kk = k * BK + rk
            a = tl.load(A + rm[:, None].to(tl.int64) * s_am + kk[None, :] * s_ak,
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(B + kk[:, None] * s_bk + rn[None, :].to(tl.int64) * s_bn,
                        mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        tl.store(C + rm[:, None].to(tl.int64) * s_cm + rn[None, :] * s_cn, acc.to(C.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _desc_kernel(A, B, C, M, N, K, s_a, s_b, s_c, PROGRAMS, A_T: tl.constexpr, B_T: tl.constexpr,
                 PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 GROUP: tl.constexpr, SUBTILE: tl.constexpr):
    """C [M, N] = A @ B; A stored [M, K] (or, A_T, [K, M]) and B [K, N] (or, B_T, [N, K]), rows s_a / s_b apart.
    PROGRAMS below the tile count: each program walks tiles program_id, + PROGRAMS, ..."""
    if A_T:
        a_desc = tl.make_tensor_descriptor(A, shape=[K, M], strides=[s_a, 1], block_shape=[BK, BM])
    else:
        a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[s_a, 1], block_shape=[BM, BK])
    if B_T:
        b_desc = tl.make_tensor_descriptor(B, shape=[N, K], strides=[s_b, 1], block_shape=[BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(B, shape=[K, N], strides=[s_b, 1], block_shape=[BK, BN])
    CN: tl.constexpr = BN // 2 if SUBTILE else BN
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[s_c, 1], block_shape=[BM, CN])
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), grid_m * grid_n, PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_of(tile, grid_m, grid_n, GROUP)
        om, on = pid_m * BM, pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            ok = k * BK
            if A_T:
                a = a_desc.load([ok, om]).T
            else:
                a = a_desc.load([om, ok])
            if B_T:
                b = b_desc.load([on, ok]).T
            else:
                b = b_desc.load([ok, on])
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        if SUBTILE:
            c0, c1 = tl.split(tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
            c_desc.store([om, on], c0.to(C.dtype.element_ty))
            c_desc.store([om, on + BN // 2], c1.to(C.dtype.element_ty))
        else:
            c_desc.store([om, on], acc.to(C.dtype.element_ty))


def stored(t: torch.Tensor) -> tuple[bool, int]:
    """(whether t [R, S] is stored transposed, i.e. column-major, the stride between its stored rows)."""
    if t.stride(1) == 1:
        return False, t.stride(0)
    assert t.stride(0) == 1, "neither row- nor column-major"
    return True, t.stride(1)


def launch(variant, conf, a, b, c, precision, sms):
    bm, bn, bk, warps, stages = conf[:5]
    subtile = len(conf) > 5 and conf[5]
    M, K = a.shape
    N = b.shape[1]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    programs = min(sms, tiles) if variant.endswith("persist") else tiles
    if variant == "ptr_persist":
        _ptr_persist_kernel[(programs,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), programs,
                                         PRECISION=precision, BM=bm, BN=bn, BK=bk, GROUP=8, num_warps=warps,
                                         num_stages=stages)
    else:
        (a_t, s_a), (b_t, s_b) = stored(a), stored(b)
        _desc_kernel[(programs,)](a, b, c, M, N, K, s_a, s_b, c.stride(0), programs, A_T=a_t, B_T=b_t,
                                  PRECISION=precision, BM=bm, BN=bn, BK=bk, GROUP=8, SUBTILE=subtile,
                                  num_warps=warps, num_stages=stages)
    return c


def pointer(a, b, c, precision):
    """The library's pointer kernel (autotuned), as the launcher ran it before TMA."""
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
    km._matmul_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), PRECISION=precision,
                            UPCAST=False)
    return c


def variants(dtype):
    for conf in CONFIGS[dtype]:
        yield "ptr_persist", conf
        yield "desc", (*conf, True)
        yield "desc_persist", (*conf, True)


def smoke() -> None:
    """Every variant and layout once on small CPU tensors through the interpreter, against float64."""
    g = torch.Generator().manual_seed(0)
    a, b, dc = (torch.randn(*s, generator=g) for s in ((96, 80), (80, 64), (96, 64)))
    for x, y in ((a, b), (a.t(), dc), (a, b.t().contiguous().t())):
        ref = x.double() @ y.double()
        for variant in ("ptr_persist", "desc", "desc_persist"):
            for conf in ((32, 32, 16, 4, 1), (32, 32, 16, 4, 1, True)):
                c = launch(variant, conf, x, y, torch.empty(x.shape[0], y.shape[1]), "ieee", 3)
                err = float((c.double() - ref).abs().max())
                print(variant, conf, tuple(x.stride()), tuple(y.stride()), f"{err:.2e}")
                assert err < 1e-3


def start():
    """(the results file, the device, the SM count, the timing config) of a GPU run, OUT.jsonl from sys.argv; the
    allocator device-side descriptors take their memory from, tf32 on for cuBLAS."""
    out, dev = begin(next(a for a in sys.argv[1:] if not a.startswith("--")), False)
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.backends.cuda.matmul.allow_tf32 = True
    return out, dev, torch.cuda.get_device_properties(0).multi_processor_count, TimingConfig(max_time_s=0.4)


def timer(out, dev, cfg, base: dict, ref: torch.Tensor):
    """timed(row, call): call checked against ref (relative L2 error, where it returns a tensor) and timed by
    bench.timing, one `time` row of base and row fields, or a `fail` row where it raises."""
    def timed(row, call):
        try:
            got = call()
            err = float((got.float() - ref).norm() / ref.norm()) if isinstance(got, torch.Tensor) else None
            s = time_call(call, dev, cfg).summary()
        except Exception as e:  # out of shared memory, registers, or an unsupported layout
            emit(out, kind="fail", **base, **row, error=str(e)[:200])
            return
        emit(out, kind="time", **base, **row, median_us=round(s["median_ms"] * 1e3, 2), rel_err=err)

    return timed


def main() -> None:
    if "--smoke" in sys.argv:
        return smoke()
    out, dev, sms, cfg = start()
    micro = "--micro" in sys.argv
    for dtype, site, M, N, K in [p for p in POINTS if not micro or p[:2] == ("bf16", "fwd")]:
        prec, tdt = ("tf32", torch.float32) if dtype == "tf32" else ("ieee", torch.bfloat16)
        g = torch.Generator(device=dev).manual_seed(0)
        a, b, dc = (torch.randn(*s, device=dev, generator=g).to(tdt) for s in ((M, K), (K, N), (M, N)))
        x, y = (a, b) if site == "fwd" else (a.t(), dc)
        ref = (x.float() @ y.float())
        c = torch.empty(x.shape[0], y.shape[1], device=dev, dtype=tdt)
        xk, yk = (km._k_major(x, 1), km._k_major(y, 0)) if dtype == "tf32" else (x, y)
        timed = timer(out, dev, cfg, {"dtype": dtype, "site": site, "shape": [M, N, K]}, ref)

        timed({"impl": "cublas"}, lambda: torch.matmul(x, y))
        timed({"impl": "library"}, lambda: km.matmul_fwd(x, y, prec))
        if not micro:
            timed({"impl": "pointer"}, lambda: pointer(xk, yk, c, prec))
        for variant, conf in MICRO if micro else [] if "--brief" in sys.argv else variants(dtype):
            timed({"impl": variant, "config": list(conf)}, lambda: launch(variant, conf, xk, yk, c, prec, sms))


if __name__ == "__main__":
    main()
