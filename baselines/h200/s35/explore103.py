"""Session 35: explore101's ring without holding a tile in registers. The rmsnorm backward only (layernorm's dw
and db would not both fit in shared memory beside two 16K-wide slots).

explore101 read a whole tile into registers (at 16K-wide rows 64 fp32 values a thread a tensor at 8 warps), and
its 16K-wide variants spilled. Here a tile is read from its slot in CHUNK-column pieces twice: once to sum
g * xhat over the row (the products accumulated chunk-shaped, reduced once a tile), once to write dx and add
dy * xhat into this program's dw partial row, which lives in shared memory (fp32). The slot is released after
the second pass. TMA into 128-byte-swizzled [rows, dim / 64, 64] slots, as explore102's swizzled variant.

Checked against the library (outputs pre-filled with NaN) and timed by bench.timing beside it, three rounds.
`--offline` compiles every variant for sm_90a (no GPU).

Run from the repository root: python3 baselines/h200/s35/explore103.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s35/explore103.py --offline   (no GPU, Triton 3.6)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explore101 as E  # noqa: E402

INNER = 64  # a box row: 128 bytes of bf16, the 128-byte swizzle's span
_issue = E._issue  # explore101's: one tile's x and dy into a slot by TMA


@gluon.jit
def _rmsnorm_bwd_chunks(x_desc, dy_desc, W, RSTD, DX, DW_PARTIAL, stride_dx, n_rows, n_cols, ROWS: gl.constexpr,
                        K: gl.constexpr, CK: gl.constexpr, WARPS: gl.constexpr, STAGES: gl.constexpr):
    """Tiles pid, pid + P, ... of ROWS rows ([ROWS, K, 64] slots), read CK box rows at a time, twice."""
    L: gl.constexpr = gl.BlockedLayout([1, 1, 8], [1, 4, 8], [1, WARPS, 1], [2, 1, 0])
    LR: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L))  # [ROWS]
    LC: gl.constexpr = gl.SliceLayout(0, L)  # [CK, 64]
    flat: gl.constexpr = gl.SwizzledSharedLayout(vec=4, per_phase=1, max_phase=1, order=[1, 0])
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    n_tiles = gl.cdiv(n_rows, ROWS)
    xs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, ROWS, K, 64], x_desc.layout)
    dys = gl.allocate_shared_memory(gl.bfloat16, [STAGES, ROWS, K, 64], dy_desc.layout)
    dws = gl.allocate_shared_memory(gl.float32, [K, 64], flat)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    fence_async_shared()
    for s in gl.static_range(STAGES):
        _issue(x_desc, dy_desc, xs, dys, bars, s, pid + s * programs, n_tiles, ROWS)
    cols = (gl.arange(0, CK, layout=gl.SliceLayout(1, LC))[:, None] * 64
            + gl.arange(0, 64, layout=gl.SliceLayout(0, LC))[None, :])  # [CK, 64], chunk 0
    for c in gl.static_range(K // CK):
        dws.slice(c * CK, CK, dim=0).store(gl.zeros([CK, 64], gl.float32, LC))
    i = 0
    for tile in range(pid, n_tiles, programs):
        slot = i % STAGES
        mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
        xt = xs.index(slot)
        dyt = dys.index(slot)
        rows = tile * ROWS + gl.arange(0, ROWS, layout=LR)
        row_ok = rows < n_rows
        rstd_rows = gl.load(RSTD + rows, mask=row_ok, other=0.0)  # [ROWS]
        rstd = rstd_rows[:, None, None]
        acc = gl.zeros([ROWS, CK, 64], gl.float32, L)
        for c in gl.static_range(K // CK):
            x = xt.slice(c * CK, CK, dim=1).load(L).to(gl.float32)
            dy = dyt.slice(c * CK, CK, dim=1).load(L).to(gl.float32)
            w = gl.load(W + c * CK * 64 + cols).to(gl.float32)
            acc += dy * w[None, :, :] * x
        c2 = gl.sum(gl.sum(acc, axis=2), axis=1) * rstd_rows / n_cols  # [ROWS]: sum(g * xhat) / dim
        for c in gl.static_range(K // CK):
            xhat = xt.slice(c * CK, CK, dim=1).load(L).to(gl.float32) * rstd
            dy = dyt.slice(c * CK, CK, dim=1).load(L).to(gl.float32)
            w = gl.load(W + c * CK * 64 + cols).to(gl.float32)
            dx = rstd * (dy * w[None, :, :] - xhat * c2[:, None, None])
            offs = rows.to(gl.int64)[:, None, None] * stride_dx + (c * CK * 64 + cols)[None, :, :]
            gl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=row_ok[:, None, None])
            dwc = dws.slice(c * CK, CK, dim=0)
            dwc.store(dwc.load(LC) + gl.sum(dy * xhat, axis=0))
        gl.thread_barrier()  # every warp is done with the slot: the TMA may refill it
        fence_async_shared()
        _issue(x_desc, dy_desc, xs, dys, bars, slot, tile + STAGES * programs, n_tiles, ROWS)
        i += 1
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))
    for c in gl.static_range(K // CK):
        gl.store(DW_PARTIAL + pid.to(gl.int64) * n_cols + c * CK * 64 + cols, dws.slice(c * CK, CK, dim=0).load(LC))


def tma_layout():
    return gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=3)


def chunks_bwd(dy, x, w, rstd, rows_per_tile, warps, stages, ck, fill=None, programs=None):
    n_rows, n_cols = x.shape
    k = n_cols // INNER
    programs = min(programs or torch.cuda.get_device_properties(x.device).multi_processor_count,
                   triton.cdiv(n_rows, rows_per_tile))
    dx = torch.empty_like(x)
    partials = torch.empty(1, programs, n_cols, dtype=torch.float32, device=x.device)
    if fill is not None:
        dx.fill_(fill)
        partials.fill_(fill)
    block = [rows_per_tile, k, INNER]
    descs = [gluon.nvidia.hopper.TensorDescriptor(t.view(n_rows, k, INNER), [n_rows, k, INNER],
                                                  [t.stride(0), INNER, 1], block, tma_layout()) for t in (x, dy)]
    _rmsnorm_bwd_chunks[(programs,)](*descs, w, rstd, dx, partials[0], dx.stride(0), n_rows, n_cols,
                                     ROWS=rows_per_tile, K=k, CK=ck, WARPS=warps, STAGES=stages, num_warps=warps)
    return dx, E.sum_partials(partials, w.dtype)[0]


def variants(dim):
    """(rows a tile, warps, stages, chunk of box rows): 64 KB tiles, two or three slots where they fit beside
    the dw row, chunks of 2K or 4K columns a pass at 8 and 16 warps, 8K (or the row) at 32 warps (added after
    the first run: EXPLORE_WARPS=32 runs those only)."""
    rows = max(1, 16384 // dim)
    out = []
    for stages in (2, 3):
        if stages * 64 + dim * 4 // 1024 > 220:
            continue
        for warps in (8, 16, 32):
            for ck in ((min(128, dim // INNER),) if warps == 32 else (32, 64)):
                if ck <= dim // INNER and ck * 64 * rows // (32 * warps) <= 32:
                    out.append((rows, warps, stages, ck))
    return out


def offline():
    print(f"triton {triton.__version__}, sm_90a")
    for dim in (4096, 16384):
        for rows, warps, stages, ck in variants(dim):
            k = dim // INNER
            desc = f"tensordesc<bf16[{rows},{k},{INNER}],{tma_layout()!r}>"
            sig = {"x_desc": desc, "dy_desc": desc, "W": "*bf16", "RSTD": "*fp32", "DX": "*bf16",
                   "DW_PARTIAL": "*fp32", "stride_dx": "i32", "n_rows": "i32", "n_cols": "i32"}
            consts = {"ROWS": rows, "K": k, "CK": ck, "WARPS": warps, "STAGES": stages}
            label = f"rmsnorm dim {dim}: {rows} rows, {warps} warps, {stages} stages, chunks of {ck} box rows"
            E.compile_report(label, _rmsnorm_bwd_chunks, sig, consts, ("stride_dx", "n_cols"), warps)


def main(path):
    out = E.start(path)
    for rows, dim in ((1024, 16384), (4096, 4096)):
        t = E.inputs(rows, dim)
        name, _, (rstd,), lib = E.norms(t)[0]
        want = [r.double() for r in lib()]
        calls = {f"{name} library": lib}
        for v in variants(dim):
            if os.environ.get("EXPLORE_WARPS") and v[1] != int(os.environ["EXPLORE_WARPS"]):
                continue
            label = f"rmsnorm chunks: {v[0]} rows a tile, {v[1]} warps, {v[2]} stages, chunks of {v[3]} box rows"
            run = lambda v=v, fill=None: chunks_bwd(t["dy"], t["x"], t["w"], rstd, *v, fill=fill)  # noqa: E731
            if E.check(out, [rows, dim], label, lambda run=run: run(fill=float("nan")), want):
                calls[label] = run
        E.time_rounds(out, [rows, dim], calls)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main([a for a in sys.argv[1:] if not a.startswith("--")][0])
