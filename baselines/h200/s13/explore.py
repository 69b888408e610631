"""Device exploration run on the H200 in session 13 (call 1: `python3 explore.py attention` then `python3 explore.py
rmsnorm`, results in explore-tiles.jsonl), kept as the record of what was timed. It launched the kernels of that
call's working tree (between commits 112661c and 14e7e79; its attention grid put heads fastest, reverted after),
and does not run against today's kernels as is. The copies() function was added afterwards and has not run."""
import json, math, os, sys, time
import torch, triton
import torch.nn.functional as F
from triton.testing import do_bench

T0 = time.time()
BUDGET = float(os.environ.get("BUDGET", 400))
OUT = open(os.path.join(os.environ.get("OUT", "/tmp"), "explore.jsonl"), "a")


def rec(**kw):
    kw["t"] = round(time.time() - T0, 1)
    OUT.write(json.dumps(kw) + "\n"); OUT.flush()
    print(json.dumps(kw), flush=True)


def bench(fn):
    try:
        return do_bench(fn, warmup=10, rep=40, return_mode="median")
    except Exception as e:
        print("ERR", type(e).__name__, str(e)[:200], flush=True)
        return float("nan")


def left():
    return BUDGET - (time.time() - T0)


def attention():
    from kernels import attention as A
    for (B, H, S, D) in [(4, 32, 4096, 128), (1, 16, 16384, 64)]:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * B * H * S * S * D / 2
        sdpa = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        rec(kind="att_fwd", shape=[B, H, S, D], impl="sdpa", ms=sdpa, tflops=flops / sdpa / 1e9)
        o = torch.empty_like(q); lse = torch.empty(B * H, S, device="cuda", dtype=torch.float32)
        meta = dict(D=D, HEAD_DIM=D, UPCAST=False, PRECISION="tf32", CAUSAL=True)
        scale = 1 / math.sqrt(D) * A.LOG2E
        fwd_cfgs = [(64, 32, 4, s) for s in (2, 3, 4)] + [(64, 64, 4, s) for s in (2, 3, 4)] + \
                   [(128, n, w, s) for n in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4)]
        for BM, BN, w, s in fwd_cfgs:
            if left() < 0: return
            if D == 128 and BN == 128 and w == 4: continue
            fn = lambda: A._fwd_kernel.fn[(B * H, triton.cdiv(S, BM))](q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3],
                     *v.stride()[:3], *o.stride()[:3], H, S, scale, BM=BM, BN=BN, num_warps=w, num_stages=s, **meta)
            ms = bench(fn)
            rec(kind="att_fwd", shape=[B, H, S, D], cfg=[BM, BN, w, s], ms=ms, tflops=flops / ms / 1e9, vs_sdpa=sdpa / ms)
        # backward kernels
        qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True)
        do = torch.randn_like(out)
        sb = bench(lambda: out.backward(do, retain_graph=True))
        rec(kind="att_bwd", shape=[B, H, S, D], impl="sdpa", ms=sb, tflops=2.5 * flops / sb / 1e9)
        o, lse = A.flash_attention_fwd(q, k, v, True)
        delta = torch.empty_like(lse)
        A._delta_kernel[(triton.cdiv(S, 64), B * H)](o, do, delta, *o.stride()[:3], *do.stride()[:3], H, S, D=D, HEAD_DIM=D, BM=64)
        dq, dk, dv = (torch.empty_like(do) for _ in range(3))
        args = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], H, S, scale, 1 / math.sqrt(D))
        for BM, BN, w, s in [(32, 128, 4, 2), (32, 128, 4, 3), (32, 128, 4, 4), (32, 128, 4, 5), (32, 128, 8, 3),
                             (64, 128, 8, 2), (64, 128, 8, 3), (64, 64, 4, 2), (64, 64, 4, 3), (16, 128, 4, 3),
                             (32, 64, 4, 3), (16, 64, 4, 4)]:
            if left() < 0: return
            ms = bench(lambda: A._dkdv_kernel.fn[(B * H, triton.cdiv(S, BN))](q, k, v, do, lse, delta, dk, dv, *args,
                       BM=BM, BN=BN, num_warps=w, num_stages=s, **meta))
            rec(kind="att_dkdv", shape=[B, H, S, D], cfg=[BM, BN, w, s], ms=ms)
        for BM, BN, w, s in [(128, 32, 4, 2), (128, 32, 4, 3), (128, 32, 4, 5), (128, 32, 8, 3), (128, 64, 8, 2),
                             (128, 64, 8, 3), (64, 64, 4, 2), (64, 64, 4, 3), (64, 32, 4, 3), (64, 32, 4, 5),
                             (128, 16, 4, 3), (64, 16, 4, 4)]:
            if left() < 0: return
            ms = bench(lambda: A._dq_kernel.fn[(B * H, triton.cdiv(S, BM))](q, k, v, do, lse, delta, dq, *args,
                       BM=BM, BN=BN, num_warps=w, num_stages=s, **meta))
            rec(kind="att_dq", shape=[B, H, S, D], cfg=[BM, BN, w, s], ms=ms)
        del q, k, v, qr, kr, vr, out, do, o, lse, dq, dk, dv


def rmsnorm():
    from kernels import rmsnorm as R
    from kernels._rows import reduction_programs, row_block

    def eager(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
    comp = torch.compile(eager)
    for n, d in [(65536, 768), (16384, 768), (1024, 16384), (4096, 4096), (1024, 4096), (16384, 4096)]:
        if left() < 0: return
        x = torch.randn(n, d, device="cuda", dtype=torch.bfloat16); w = torch.randn(d, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * n * d * 2 + 2 * d + 4 * n
        c = bench(lambda: comp(x, w))
        rec(kind="rms_fwd", shape=[n, d], impl="compile", us=c * 1e3, gbps=nbytes / c / 1e6)
        y = torch.empty_like(x); rstd = torch.empty(n, device="cuda", dtype=torch.float32)
        block, single = row_block(d)
        for r in (1, 2, 4, 8, 16):
            for nw in (1, 2, 4, 8, 16, 32):
                tile = r * block
                if not ((r == 1 or single) and tile <= max(block, 8192) and 4 <= tile // (32 * nw) <= 32): continue
                ms = bench(lambda: R._rmsnorm_fwd_kernel.fn[(triton.cdiv(n, r),)](x, w, y, rstd, x.stride(0), y.stride(0), n, d, 1e-6,
                           BLOCK=block, SINGLE=single, ROWS=r, num_warps=nw))
                rec(kind="rms_fwd", shape=[n, d], cfg=[r, nw], us=ms * 1e3, gbps=nbytes / ms / 1e6, vs_compile=c / ms)
    for n, d in [(65536, 4096), (16384, 4096), (4096, 4096), (1024, 16384), (65536, 768), (16384, 16384)]:
        if left() < 0: return
        x = torch.randn(n, d, device="cuda", dtype=torch.bfloat16); w = torch.randn(d, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn_like(x); rstd = torch.rand(n, device="cuda", dtype=torch.float32) + 0.5
        dx = torch.empty_like(x)
        block, single = row_block(d)
        base = 3 * n * d * 2 + 4 * n
        for per_sm in (2, 4, 8, 16):
            programs, rpp = reduction_programs(n, x.device, per_sm)
            part = torch.empty(programs, d, device="cuda", dtype=torch.float32)
            nbytes = base + 2 * programs * d * 4
            for r in (1, 2, 4, 8):
                for nw in (2, 4, 8, 16, 32):
                    tile = r * block
                    if not ((r == 1 or single) and tile <= max(block, 8192) and 4 <= tile // (32 * nw) <= 32): continue
                    for st in ((1, 2, 3) if single else (1,)):
                        if left() < 0: return
                        ms = bench(lambda: R._rmsnorm_bwd_kernel.fn[(programs,)](x, w, dy, rstd, dx, part, x.stride(0), dy.stride(0),
                                   dx.stride(0), n, d, rpp, BLOCK=block, SINGLE=single, ROWS=r, STAGES=st, num_warps=nw))
                        rec(kind="rms_bwd", shape=[n, d], per_sm=per_sm, cfg=[r, nw, st], us=ms * 1e3, gbps=nbytes / ms / 1e6,
                            bytes_min=base)


def copies():
    """A device-to-device copy of the bytes each small norms point moves (read x + write y): what any kernel
    could reach at that size, against the 2 GiB copy the calibration uses."""
    for n, d in [(1024, 4096), (1024, 16384), (4096, 4096), (16384, 768), (4096, 16384), (65536, 4096)]:
        x = torch.randn(n, d, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        ms = bench(lambda: y.copy_(x))
        rec(kind="copy", shape=[n, d], us=ms * 1e3, gbps=2 * x.numel() * 2 / ms / 1e6)
    big = torch.empty(2**30, dtype=torch.uint8, device="cuda"); out = torch.empty_like(big)
    ms = bench(lambda: out.copy_(big))
    rec(kind="copy", shape=[2**30], us=ms * 1e3, gbps=2 * 2**30 / ms / 1e6)


which = sys.argv[1:] or ["attention", "rmsnorm"]
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
for name in which:
    globals()[name]()
print("done in", round(time.time() - T0), "s", flush=True)
