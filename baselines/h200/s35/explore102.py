"""Session 35: explore101's ring of row tiles in shared memory, filled two other ways, to tell whether its TMA
copies (unswizzled [rows, dim / 256, 256] boxes) are what made it 1.2-1.9x slower than the library:

- cp.async (COPY=1): every thread copies 16-byte pieces of the tile with cp.async (LDGSTS), one commit group a
  tile; a tile is used once its group has landed (wait_group) and the warps have met at a barrier. STAGES - 1
  tiles in flight, as explore101.
- TMA into 128-byte-swizzled slots (COPY=0, INNER=64): the view is [rows, dim / 64, 64], each box row 128 bytes,
  the swizzle TMA tiles are usually read with.

The math of a tile is explore101's. Checked against the library (outputs pre-filled with NaN) and timed by
bench.timing beside it, three rounds in alternation; cpu_ms (host time a call) is recorded too. EXPLORE_SHAPES /
EXPLORE_ONLY / EXPLORE_VARIANTS narrow the run; `--offline` compiles every variant for sm_90a (no GPU).

Run from the repository root: python3 baselines/h200/s35/explore102.py OUT.jsonl   (on a GPU)
                              python3 baselines/h200/s35/explore102.py --offline   (no GPU, Triton 3.6)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explore101 as E  # noqa: E402


@gluon.jit
def _issue(x_desc, dy_desc, X, DY, xs, dys, bars, slot, tile, n_tiles, n_rows, stride_x, stride_dy, offs,
           ROWS: gl.constexpr, K: gl.constexpr, INNER: gl.constexpr, COPY: gl.constexpr, L: gl.constexpr):
    """Tile `tile`'s x and dy into ring slot `slot`: TMA completing on the slot's mbarrier, or this thread's
    cp.async pieces committed as one group (an empty group past the end, so the group count stays in step)."""
    if COPY == 0:
        ok = tile < n_tiles
        bar = bars.index(slot)
        mbarrier.expect(bar, x_desc.block_type.nbytes + dy_desc.block_type.nbytes, pred=ok)
        tma.async_copy_global_to_shared(x_desc, [tile * ROWS, 0, 0], bar, xs.index(slot), pred=ok)
        tma.async_copy_global_to_shared(dy_desc, [tile * ROWS, 0, 0], bar, dys.index(slot), pred=ok)
    else:
        rows = tile * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, gl.SliceLayout(2, L)))
        ok = (rows < n_rows)[:, None, None]
        rows64 = rows.to(gl.int64)[:, None, None]
        async_copy.async_copy_global_to_shared(xs.index(slot), X + rows64 * stride_x + offs[None, :, :], mask=ok)
        async_copy.async_copy_global_to_shared(dys.index(slot), DY + rows64 * stride_dy + offs[None, :, :],
                                               mask=ok)
        async_copy.commit_group()


@gluon.jit
def _norm_bwd_ring2(x_desc, dy_desc, X, DY, W, MEAN, RSTD, DX, DW_PARTIAL, DB_PARTIAL, stride_x, stride_dy,
                    stride_dx, n_rows, n_cols, ROWS: gl.constexpr, K: gl.constexpr, INNER: gl.constexpr,
                    WARPS: gl.constexpr, STAGES: gl.constexpr, LAYER: gl.constexpr, COPY: gl.constexpr):
    """explore101's loop over tiles pid, pid + P, ... of ROWS rows ([ROWS, K, INNER] blocks, K * INNER = dim),
    the ring filled by TMA (COPY 0) or cp.async (COPY 1); w held in registers."""
    L: gl.constexpr = gl.BlockedLayout([1, 1, 8], [1, 256 // INNER, INNER // 8], [1, WARPS, 1], [2, 1, 0])
    LR: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, L))  # [ROWS]
    LC: gl.constexpr = gl.SliceLayout(0, L)  # [K, INNER]
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    n_tiles = gl.cdiv(n_rows, ROWS)
    if COPY == 0:
        xs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, ROWS, K, INNER], x_desc.layout)
        dys = gl.allocate_shared_memory(gl.bfloat16, [STAGES, ROWS, K, INNER], dy_desc.layout)
    else:
        flat: gl.constexpr = gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=1, order=[2, 1, 0])
        xs = gl.allocate_shared_memory(gl.bfloat16, [STAGES, ROWS, K, INNER], flat)
        dys = gl.allocate_shared_memory(gl.bfloat16, [STAGES, ROWS, K, INNER], flat)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    cols = (gl.arange(0, K, layout=gl.SliceLayout(1, LC))[:, None] * INNER
            + gl.arange(0, INNER, layout=gl.SliceLayout(0, LC))[None, :])  # [K, INNER]
    if COPY == 0:
        for s in gl.static_range(STAGES):
            mbarrier.init(bars.index(s), count=1)
        fence_async_shared()
        for s in gl.static_range(STAGES):
            _issue(x_desc, dy_desc, X, DY, xs, dys, bars, s, pid + s * programs, n_tiles, n_rows, stride_x,
                   stride_dy, cols, ROWS, K, INNER, COPY, L)
    else:
        for s in gl.static_range(STAGES - 1):
            _issue(x_desc, dy_desc, X, DY, xs, dys, bars, s, pid + s * programs, n_tiles, n_rows, stride_x,
                   stride_dy, cols, ROWS, K, INNER, COPY, L)

    w = gl.load(W + cols).to(gl.float32)
    dw = gl.zeros([K, INNER], gl.float32, LC)
    db = gl.zeros([K, INNER], gl.float32, LC)
    i = 0
    for tile in range(pid, n_tiles, programs):
        slot = i % STAGES
        if COPY == 0:
            mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
            x = xs.index(slot).load(L).to(gl.float32)
            dy = dys.index(slot).load(L).to(gl.float32)
            gl.thread_barrier()  # every warp has read the slot: the TMA may refill it
            fence_async_shared()
            _issue(x_desc, dy_desc, X, DY, xs, dys, bars, slot, tile + STAGES * programs, n_tiles, n_rows,
                   stride_x, stride_dy, cols, ROWS, K, INNER, COPY, L)
        else:
            async_copy.wait_group(STAGES - 2)  # this thread's pieces of tile i have landed
            gl.thread_barrier()  # everyone's have, and everyone is done with the slot read last step
            _issue(x_desc, dy_desc, X, DY, xs, dys, bars, (i + STAGES - 1) % STAGES,
                   tile + (STAGES - 1) * programs, n_tiles, n_rows, stride_x, stride_dy, cols, ROWS, K, INNER,
                   COPY, L)
            x = xs.index(slot).load(L).to(gl.float32)
            dy = dys.index(slot).load(L).to(gl.float32)

        rows = tile * ROWS + gl.arange(0, ROWS, layout=LR)
        dw, db = E._tile_step(x, dy, w, MEAN, RSTD, DX, rows, cols, stride_dx, n_rows, n_cols, dw, db, LAYER)
        i += 1
    if COPY == 0:
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(s))
    else:
        async_copy.wait_group(0)
    gl.store(DW_PARTIAL + pid.to(gl.int64) * n_cols + cols, dw)
    if LAYER:
        gl.store(DB_PARTIAL + pid.to(gl.int64) * n_cols + cols, db)


def tma_layout(inner):
    return gl.NVMMASharedLayout(swizzle_byte_width=2 * inner if inner <= 64 else 0, element_bitwidth=16, rank=3)


def ring2_bwd(dy, x, w, stats, layer, rows_per_tile, warps, stages, programs, copy, inner, fill=None):
    """dx, dw (, db); with `fill` the outputs start filled with it (a check then sees every element written)."""
    n_rows, n_cols = x.shape
    k = n_cols // inner
    programs = min(programs, triton.cdiv(n_rows, rows_per_tile))
    dx = torch.empty_like(x)
    partials = torch.empty(2 if layer else 1, programs, n_cols, dtype=torch.float32, device=x.device)
    if fill is not None:
        dx.fill_(fill)
        partials.fill_(fill)
    block, layout = [rows_per_tile, k, inner], tma_layout(inner)
    descs = [gluon.nvidia.hopper.TensorDescriptor(t.view(n_rows, k, inner), [n_rows, k, inner],
                                                  [t.stride(0), inner, 1], block, layout) for t in (x, dy)]
    mean, rstd = stats if layer else (stats[0], stats[0])
    _norm_bwd_ring2[(programs,)](*descs, x, dy, w, mean, rstd, dx, partials[0], partials[-1], x.stride(0),
                                 dy.stride(0), dx.stride(0), n_rows, n_cols, ROWS=rows_per_tile, K=k, INNER=inner,
                                 WARPS=warps, STAGES=stages, LAYER=layer, COPY=copy, num_warps=warps)
    return (dx, *E.sum_partials(partials, w.dtype))



def variants(dim, sms):
    """(rows a tile, warps, stages, programs, copy, inner): explore101's fastest shapes of tile, each filled by
    cp.async (unswizzled [.., 256] slots) and by TMA into 128-byte-swizzled [.., 64] slots."""
    rows = 1 if dim >= 16384 else 4
    out = []
    for stages in (2, 3):
        for warps in (8, 16):
            out.append((rows, warps, stages, sms, 1, 256))
            out.append((rows, warps, stages, sms, 0, 64))
    return out


def offline():
    print(f"triton {triton.__version__}, sm_90a")
    for dim in (4096, 16384):
        for layer in (False, True):
            for rows, warps, stages, programs, copy, inner in variants(dim, 132):
                k = dim // inner
                desc = f"tensordesc<bf16[{rows},{k},{inner}],{tma_layout(inner)!r}>"
                sig = {"x_desc": desc, "dy_desc": desc, "X": "*bf16", "DY": "*bf16", "W": "*bf16", "MEAN": "*fp32",
                       "RSTD": "*fp32", "DX": "*bf16", "DW_PARTIAL": "*fp32", "DB_PARTIAL": "*fp32",
                       "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "n_rows": "i32", "n_cols": "i32"}
                consts = {"ROWS": rows, "K": k, "INNER": inner, "WARPS": warps, "STAGES": stages, "LAYER": layer,
                          "COPY": copy}
                label = (f"{'layernorm' if layer else 'rmsnorm'} dim {dim}: {rows} rows, {warps} warps, "
                         f"{stages} stages, {'cp.async' if copy else 'TMA swizzled'}")
                E.compile_report(label, _norm_bwd_ring2, sig, consts, ("stride_x", "stride_dy", "stride_dx", "n_cols"),
                                 warps)


def main(path):
    out = E.start(path)
    sms = torch.cuda.get_device_properties("cuda").multi_processor_count
    only = os.environ.get("EXPLORE_ONLY")
    for rows, dim in E.shapes([(1024, 16384), (4096, 4096)]):
        t = E.inputs(rows, dim)
        calls = {}
        for name, layer, stats, lib in E.norms(t):
            if only and name != only:
                continue
            want = [r.double() for r in lib()]
            calls[f"{name} library"] = lib
            for v in variants(dim, sms):
                label = (f"{name} {'cp.async' if v[4] else 'TMA swizzled'}: {v[0]} rows a tile, {v[1]} warps, "
                         f"{v[2]} stages, {v[3]} programs")
                run = (lambda layer=layer, stats=stats, v=v, fill=None:
                       ring2_bwd(t["dy"], t["x"], t["w"], stats, layer, *v, fill=fill))
                if E.check(out, [rows, dim], label, lambda run=run: run(fill=float("nan")), want):
                    calls[label] = run
        E.time_rounds(out, [rows, dim], calls)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main([a for a in sys.argv[1:] if not a.startswith("--")][0])
