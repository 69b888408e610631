"""Attention forward tiles around the autotuner's pick at the issue-9 point (session 18; not part of the project).
GPU: OUT=$OUT BUDGET=250 python3 explore18.py     CPU: TRITON_INTERPRET=1 python explore18.py dry"""
import json, math, os, sys, time

import torch
import triton

T0 = time.time()
DRY = sys.argv[1:] == ["dry"]
DEV = "cpu" if DRY else "cuda"
BUDGET = 1e9 if DRY else float(os.environ.get("BUDGET", 250))
OUT = open(os.path.join(os.environ.get("OUT", "/tmp"), "explore18.jsonl"), "a")


def rec(**kw):
    kw["t"] = round(time.time() - T0, 1)
    OUT.write(json.dumps(kw) + "\n"); OUT.flush()
    print(json.dumps(kw), flush=True)


def bench(fn):
    if DRY:
        fn()
        return 1.0
    from triton.testing import do_bench
    try:
        return do_bench(fn, warmup=25, rep=100, return_mode="median")
    except Exception as e:
        print("ERR", type(e).__name__, str(e)[:300], flush=True)
        return float("nan")


def main(causal=True):
    from kernels import attention as A
    bsz, heads, seq, d = (1, 2, 100, 16) if DRY else (4, 32, 4096, 128)
    dtype = torch.float32 if DRY else torch.bfloat16
    q, k, v = (torch.randn(bsz, heads, seq, d, device=DEV, dtype=dtype) for _ in range(3))
    flops = 4 * bsz * heads * seq * seq * d / (2 if causal else 1)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    A._ready_tma(q.device)
    meta = A._meta(q)
    o, lse = torch.empty_like(q), torch.empty(bsz * heads, seq, device=DEV)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
    tiles = [(16, 16, 4, 1)] if DRY else [(128, 64, 4, 2), (256, 64, 8, 2), (128, 64, 8, 2), (128, 32, 4, 2),
                                          (256, 64, 8, 3), (256, 32, 8, 2), (128, 128, 8, 2), (128, 64, 4, 2)]
    for rep in range(2):
        if not DRY:
            ms = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
            rec(shape=[bsz, heads, seq, d], impl="sdpa", rep=rep, us=ms * 1e3, tflops=flops / ms / 1e9)
        for bm, bn, warps, stages in tiles:
            if time.time() - T0 > BUDGET:
                return
            grid = (triton.cdiv(seq, bm), bsz * heads)
            fn = lambda: A._fwd_kernel.fn[grid](q, k, v, o, lse, *strides, bsz, heads, seq, A.LOG2E / math.sqrt(d),
                                                CAUSAL=causal, BM=bm, BN=bn, TMA=A._TMA_OK or DRY, num_warps=warps,
                                                num_stages=stages, **meta)
            o.zero_()
            ms = bench(fn)
            err = ((o.float() - want.float()).norm() / want.float().norm()).item()
            rec(shape=[bsz, heads, seq, d], rep=rep, tile=[bm, bn, warps, stages], us=ms * 1e3,
                tflops=flops / ms / 1e9, rel_err=err)
            if DRY:
                assert err < 1e-5, err
                return


if __name__ == "__main__":
    if not DRY:
        print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    main()
    print(f"done in {time.time() - T0:.0f} s", flush=True)
