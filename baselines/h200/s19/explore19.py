"""Norm forwards against torch.compile's kernels (session 19+; not part of the project). Every call is timed by
bench.timing.time_call (events after the zeroing flush, a spin kernel holding the stream while the host issues,
CUDA graphs under 15 us), so library, compile and direct launches compare; rows go to $OUT/explore19.jsonl.

- passes3: Inductor's 16K-wide layernorm forward as read from its cache on the H200 (session 18): one row a
  program, C-wide chunks, three passes over x (sum; squared deviations from the mean; output), the first two
  loads evict_last, the third evict_first, num_stages 1. rmsnorm: two passes. C 1024-4096, warps 8-32, N a
  constexpr (Inductor compiles the shape in) or not, eviction hints or not. Offline (sm_90, Triton 3.6) num_stages
  1 and 3 give the same SASS for these loops; N constexpr unrolls them: 40 global loads against 11 (all of a
  row's chunks in flight at once) -- the likely difference to session 18's lanes kernel (303 us vs compile 262).
- narrow: 768-wide rows, where compile's persistent kernel (one row a program, ONE warp, R0_BLOCK 1024, shapes
  compiled in) is 4-7% ahead: the same layout with N constexpr, XBLOCK rows a program 1/2/4, warps 1/2/4.

GPU:  OUT=$OUT BUDGET=500 python3 explore19.py passes3 narrow
CPU:  TRITON_INTERPRET=1 python explore19.py dry
"""
import json, os, sys, time

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/indcache")  # narrow2 brings Inductor's kernels back

import torch
import triton
import triton.language as tl

T0 = time.time()
DRY = sys.argv[1:] == ["dry"]
DEV = "cpu" if DRY else "cuda"
BUDGET = 1e9 if DRY else float(os.environ.get("BUDGET", 500))
OUT = open(os.path.join(os.environ.get("OUT", "/tmp"), "explore19.jsonl"), "a")


def rec(**kw):
    kw["t"] = round(time.time() - T0, 1)
    OUT.write(json.dumps(kw) + "\n"); OUT.flush()
    print(json.dumps(kw), flush=True)


def timed(fn):
    """Median ms by the bench's own timer (device time only), nan on an error."""
    if DRY:
        fn()
        return 1.0
    from bench.timing import TimingConfig, time_call
    try:
        return time_call(fn, "cuda", TimingConfig(max_time_s=0.5)).summary()["median_ms"]
    except Exception as e:
        print("ERR", type(e).__name__, str(e)[:300], flush=True)
        return float("nan")


DEADLINE = [1e18]


def left():
    return min(BUDGET - (time.time() - T0), DEADLINE[0] - time.time())


@triton.jit
def ln_passes(X, W, B, Y, MEAN, RSTD, stride, n_cols, eps, N: tl.constexpr, C: tl.constexpr, RMS: tl.constexpr,
              STATIC: tl.constexpr, HINTS: tl.constexpr):
    """One row a program in C-wide chunks: (layernorm) the sum, then the squared deviations from the mean, then
    the output; (rmsnorm) the sum of squares, then the output. STATIC: the row length is the constexpr N."""
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride
    y_row = Y + row * stride
    n = N if STATIC else n_cols
    acc = tl.zeros([C], dtype=tl.float32)
    mean = 0.0
    if not RMS:
        for start in range(0, n, C):
            cols = start + tl.arange(0, C)
            if HINTS:
                x = tl.load(x_row + cols, mask=cols < n, other=0.0, eviction_policy="evict_last").to(tl.float32)
            else:
                x = tl.load(x_row + cols, mask=cols < n, other=0.0).to(tl.float32)
            acc += x
        mean = tl.sum(acc, 0) / n
        acc = tl.zeros([C], dtype=tl.float32)
    for start in range(0, n, C):
        cols = start + tl.arange(0, C)
        if HINTS:
            x = tl.load(x_row + cols, mask=cols < n, other=0.0, eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_row + cols, mask=cols < n, other=0.0).to(tl.float32)
        d = tl.where(cols < n, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / n + eps)
    for start in range(0, n, C):
        cols = start + tl.arange(0, C)
        ok = cols < n
        if HINTS:
            x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(W + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
            w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w
        if not RMS:
            if HINTS:
                y += tl.load(B + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            else:
                y += tl.load(B + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=ok)
    if not RMS:
        tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


@triton.jit
def norm_narrow(X, W, B, Y, MEAN, RSTD, stride, n_rows, eps, N: tl.constexpr, BLOCK: tl.constexpr,
                XB: tl.constexpr, RMS: tl.constexpr):
    """XB rows a program, each whole in registers, the row length a constexpr (as Inductor's persistent
    reduction with static shapes)."""
    rows = tl.program_id(0) * XB + tl.arange(0, XB)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(X + rows64 * stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if RMS:
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
        y = x * rstd[:, None] * w[None, :]
    else:
        mean = tl.sum(x, axis=1) / N
        xc = tl.where(mask, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / N + eps)
        b = tl.load(B + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = xc * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(MEAN + rows, mean, mask=row_ok)
    tl.store(Y + rows64 * stride + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=row_ok)


def _setup(n, d, rms):
    from impls.layernorm import layernorm_eager
    from impls.rmsnorm import rmsnorm_eager
    x = torch.randn(n, d, device=DEV, dtype=torch.float32 if DRY else torch.bfloat16) + 0.5
    w, b = (torch.randn(d, device=DEV, dtype=x.dtype) for _ in range(2))
    want = rmsnorm_eager(x.double(), w.double()) if rms else layernorm_eager(x.double(), w.double(), b.double())
    y, mean, rstd = torch.empty_like(x), torch.empty(n, device=DEV), torch.empty(n, device=DEV)
    return x, w, b, want, y, mean, rstd


def _references(name, n, d, rms, x, w, b):
    """The library and torch.compile of the eager formula, timed the same way."""
    if DRY:
        return
    from impls.layernorm import layernorm_eager
    from impls.rmsnorm import rmsnorm_eager
    from kernels import layernorm as L, rmsnorm as R
    nbytes = 2 * n * d * x.element_size()
    ms = timed((lambda: R.rmsnorm_fwd(x, w)) if rms else (lambda: L.layernorm_fwd(x, w, b)))
    rec(kind=name, norm="rms" if rms else "ln", shape=[n, d], impl="library", us=ms * 1e3, gbps=nbytes / ms / 1e6)
    torch._dynamo.reset()
    comp = torch.compile(rmsnorm_eager if rms else layernorm_eager, dynamic=False)
    call = (lambda: comp(x, w)) if rms else (lambda: comp(x, w, b))
    call()
    ms = timed(call)
    rec(kind=name, norm="rms" if rms else "ln", shape=[n, d], impl="compile", us=ms * 1e3, gbps=nbytes / ms / 1e6)


def passes3(shapes=((16384, 16384), (4096, 16384), (65536, 16384), (1024, 16384))):
    for n, d in shapes:
        if DRY:
            n, d = 5, 3000
        for rms in (False, True):
            x, w, b, want, y, mean, rstd = _setup(n, d, rms)
            _references("passes3", n, d, rms, x, w, b)
            nbytes = 2 * n * d * x.element_size()
            trials = [(1024, 4, 1, True, True)] if DRY else [
                (c, wp, st, static, hints) for c in (1024, 2048, 4096) for wp in (8, 16, 32) if 2 <= c // (32 * wp) <= 16
                for st in (1,) for static in (True, False) for hints in (True, False)]
            for c, warps, stages, static, hints in trials:
                if left() < 0:
                    return
                fn = lambda: ln_passes[(n,)](x, w, b, y, mean, rstd, x.stride(0), d, 1e-6 if rms else 1e-5, N=d, C=c,
                                             RMS=rms, STATIC=static, HINTS=hints, num_warps=warps, num_stages=stages)
                y.zero_()
                ms = timed(fn)
                err = ((y.double() - want).norm() / want.norm()).item()
                rec(kind="passes3", norm="rms" if rms else "ln", shape=[n, d], C=c, warps=warps, stages=stages,
                    static=static, hints=hints, us=ms * 1e3, gbps=nbytes / ms / 1e6, rel_err=err)
                if DRY:
                    assert err < 1e-5, err
        if DRY:
            return


def narrow(shapes=((16384, 768), (65536, 768), (1024, 4096))):
    for n, d in shapes:
        if DRY:
            n, d = 7, 300
        for rms in (False, True):
            x, w, b, want, y, mean, rstd = _setup(n, d, rms)
            _references("narrow", n, d, rms, x, w, b)
            nbytes = 2 * n * d * x.element_size()
            block = triton.next_power_of_2(d)
            trials = [(2, 4)] if DRY else [(xb, wp) for xb in (1, 2, 4, 8) for wp in (1, 2, 4, 8)
                                            if 4 <= xb * block // (32 * wp) <= 64]
            for xb, warps in trials:
                if left() < 0:
                    return
                fn = lambda: norm_narrow[(triton.cdiv(n, xb),)](x, w, b, y, mean, rstd, x.stride(0), n,
                                                                 1e-6 if rms else 1e-5, N=d, BLOCK=block, XB=xb,
                                                                 RMS=rms, num_warps=warps, num_stages=1)
                y.zero_()
                ms = timed(fn)
                err = ((y.double() - want).norm() / want.norm()).item()
                rec(kind="narrow", norm="rms" if rms else "ln", shape=[n, d], xb=xb, warps=warps, us=ms * 1e3,
                    gbps=nbytes / ms / 1e6, rel_err=err)
                if DRY:
                    assert err < 1e-5, err
        if DRY:
            return


@triton.jit
def ln_narrow2(X, W, B, Y, MEAN, RSTD, stride, n_rows, eps, N: tl.constexpr, BLOCK: tl.constexpr, XB: tl.constexpr,
               ROWMASK: tl.constexpr, RSQRT: tl.constexpr, STATS: tl.constexpr):
    """Layernorm, XB whole rows a program; ROWMASK off: the grid covers the rows exactly (Inductor's xmask is all
    true when XBLOCK divides the rows); RSQRT: rsqrt instead of 1 / sqrt; STATS off: no mean / rstd stores."""
    rows = tl.program_id(0) * XB + tl.arange(0, XB)
    cols = tl.arange(0, BLOCK)
    if ROWMASK:
        row_ok = rows < n_rows
    else:
        row_ok = tl.full([XB], True, tl.int1)
    mask = row_ok[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(X + rows64 * stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(B + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N + eps
    if RSQRT:
        rstd = tl.math.rsqrt(var)
    else:
        rstd = 1.0 / tl.sqrt(var)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(Y + rows64 * stride + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    if STATS:
        tl.store(MEAN + rows, mean, mask=row_ok)
        tl.store(RSTD + rows, rstd, mask=row_ok)


def narrow2(shapes=((16384, 768), (65536, 768))):
    """Layernorm at 768-wide rows, where compile stays 5-7% ahead: what Inductor's kernel does that ours does not
    (row mask, rsqrt, the stats stores), one at a time; then Inductor's own kernels copied to $OUT/ind."""
    for n, d in shapes:
        if DRY:
            n, d = 8, 300
        x, w, b, want, y, mean, rstd = _setup(n, d, False)
        _references("narrow2", n, d, False, x, w, b)
        nbytes = 2 * n * d * x.element_size()
        block = triton.next_power_of_2(d)
        variants = [(True, False, True), (False, False, True), (False, True, True), (False, True, False)]
        trials = [(2, 2)] if DRY else [(xb, wp) for xb in (1, 2, 4) for wp in (1, 2, 4) if 8 <= xb * block // (32 * wp) <= 32]
        for rowmask, rsq, stats in variants:
            for xb, warps in trials:
                if left() < 0:
                    return
                fn = lambda: ln_narrow2[(triton.cdiv(n, xb),)](x, w, b, y, mean, rstd, x.stride(0), n, 1e-5, N=d,
                                                                BLOCK=block, XB=xb, ROWMASK=rowmask, RSQRT=rsq,
                                                                STATS=stats, num_warps=warps, num_stages=1)
                y.zero_()
                ms = timed(fn)
                err = ((y.double() - want).norm() / want.norm()).item()
                rec(kind="narrow2", norm="ln", shape=[n, d], xb=xb, warps=warps, rowmask=rowmask, rsqrt=rsq,
                    stats=stats, us=ms * 1e3, gbps=nbytes / ms / 1e6, rel_err=err)
                if DRY:
                    assert err < 1e-5, err
        if DRY:
            return
    import glob, shutil
    dest = os.path.join(os.environ.get("OUT", "/tmp"), "ind")
    for f in glob.glob(os.environ["TORCHINDUCTOR_CACHE_DIR"] + "/**/*", recursive=True):
        if (f.endswith(".py") or f.endswith(".best_config")) and os.path.getsize(f) < 200_000 and "triton" in open(f, errors="ignore").read()[:5000] + f:
            os.makedirs(dest, exist_ok=True)
            shutil.copy(f, dest)


if __name__ == "__main__":
    if DRY:
        passes3()
        narrow()
        narrow2()
    else:
        print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
        names = sys.argv[1:]
        for i, name in enumerate(names):
            DEADLINE[0] = time.time() + (BUDGET - (time.time() - T0)) * (0.6 if i < len(names) - 1 else 1.0)
            globals()[name]()
    print(f"done in {time.time() - T0:.0f} s", flush=True)
