"""Session 42: softmax forward with each row held whole in shared memory, brought in by TMA, written in Gluon.

The library's long-row forward (rows wider than a 16K block: 256 x 65536) walks each row twice, the second time
from L2, one program a row (25.5 us at 256 x 65536 in session 38, against a copy's 20.0); at 128 x 65536 it took
18.0-18.2 us against a copy's 10.1-11.0 (session 29, explore79): a program walking its row a chunk at a time
keeps too few loads in flight. A row held in registers spills (explore87).

Here a program holds one row in shared memory (a bf16 row of 65536 is 128 KB; an H200 SM has 227 KB), as NCH
chunks of RB x 256 elements (x viewed as [rows * dim / 256, 256], one TMA box a chunk). All of a row's chunk loads
are issued at once, each completing on its own mbarrier; the running max and sum are taken chunk by chunk as they
arrive (each 256-wide line reduced within its warp, the lines' pairs merged at the end), then each chunk is turned
into y in place and stored by TMA. A program walks rows pid, pid + P, ...: once chunk c's store has read shared
memory (tma.store_wait), chunk c of the program's next row is loaded into it, so the next row's loads overlap this
row's stores. x is read from DRAM once.

Variants (RB, warps, programs an SM) per shape, against the library, torch.softmax and a copy of the same bytes,
three rounds, bf16, each checked against float64 (the largest difference over the largest value, outputs first
filled with NaN). Dims that are a multiple of 256 only. GPU only (Hopper); `--offline` compiles every variant for
sm_90a instead (Triton 3.6 on the CPU machine) and prints registers, spills and shared memory.

Run from the repository root: python3 baselines/h200/s42/explore115.py OUT.jsonl [ROWSxDIM ...]   (on a GPU)
                              python3 baselines/h200/s42/explore115.py --offline   (no GPU, Triton 3.6)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s40"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s35"))

from _explore import begin, command_line, emit, timed_rounds  # noqa: E402
from explore101 import compile_sm90, ptxas_info  # noqa: E402

from kernels import softmax as SM  # noqa: E402

SHAPES = [(256, 65536), (128, 65536), (512, 32768), (1024, 16384), (4096, 4096)]
LINE = 256  # a TMA box's innermost extent: x is viewed as lines of 256 elements
SMEM = 200 * 1024  # shared memory a SM's programs may take together (227 KB at most)


@gluon.jit
def _load_row(x_desc, buf, bars, row, ok, K: gl.constexpr, RB: gl.constexpr, NCH: gl.constexpr):
    """TMA loads of row `row`'s NCH chunks into buf, chunk c completing on bars[c] (none where not ok)."""
    for c in gl.static_range(NCH):
        mbarrier.expect(bars.index(c), x_desc.block_type.nbytes, pred=ok)
        tma.async_copy_global_to_shared(x_desc, [row * K + c * RB, 0], bars.index(c), buf.index(c), pred=ok)


@gluon.jit
def _softmax_smem(x_desc, y_desc, n_rows, K: gl.constexpr, RB: gl.constexpr, NCH: gl.constexpr,
                  WARPS: gl.constexpr):
    """Rows pid, pid + P, ... each held whole in shared memory as NCH chunks of [RB, 256] (K = dim / 256 lines a
    row, K = NCH * RB)."""
    L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [WARPS, 1], [1, 0])  # a line within one warp
    LR: gl.constexpr = gl.SliceLayout(1, L)  # [RB]: one value a line
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    buf = gl.allocate_shared_memory(x_desc.dtype, [NCH, RB, 256], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [NCH, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(NCH):
        mbarrier.init(bars.index(c), count=1)
    fence_async_shared()
    _load_row(x_desc, buf, bars, pid, pid < n_rows, K, RB, NCH)
    i = 0
    for row in range(pid, n_rows, programs):
        m_run = gl.full([RB], -float("inf"), gl.float32, LR)  # each line position's running max and sum
        s_run = gl.zeros([RB], gl.float32, LR)
        for c in gl.static_range(NCH):
            mbarrier.wait(bars.index(c), i & 1)
            x = buf.index(c).load(L).to(gl.float32)
            m_new = gl.maximum(m_run, gl.max(x, axis=1))
            s_run = s_run * gl.exp(m_run - m_new) + gl.sum(gl.exp(x - m_new[:, None]), axis=1)
            m_run = m_new
        row_max = gl.max(m_run, axis=0)
        inv = 1.0 / gl.sum(s_run * gl.exp(m_run - row_max), axis=0)
        for c in gl.static_range(NCH):
            x = buf.index(c).load(L).to(gl.float32)
            buf.index(c).store((gl.exp(x - row_max) * inv).to(y_desc.dtype))
            fence_async_shared()
            gl.thread_barrier()  # every warp's part of the chunk written before the TMA reads it
            tma.async_copy_shared_to_global(y_desc, [row * K + c * RB, 0], buf.index(c))
        nxt = row + programs
        for c in gl.static_range(NCH):
            tma.store_wait(NCH - 1 - c)  # chunk c's store has read its slot (stores complete in order)
            mbarrier.expect(bars.index(c), x_desc.block_type.nbytes, pred=nxt < n_rows)
            tma.async_copy_global_to_shared(x_desc, [nxt * K + c * RB, 0], bars.index(c), buf.index(c),
                                            pred=nxt < n_rows)
        i += 1
    tma.store_wait(0)
    for c in gl.static_range(NCH):
        mbarrier.invalidate(bars.index(c))


def line_layout():
    return gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)


def smem_softmax(x, rb, warps, per_sm, sms, y=None):
    """y = softmax(x) over its last dim by _softmax_smem: chunks of rb lines, `warps` warps, up to per_sm
    programs an SM (balanced: every program the same number of rows, give or take one)."""
    n_rows, dim = x.shape
    k = dim // LINE
    y = torch.empty_like(x) if y is None else y
    descs = [gluon.nvidia.hopper.TensorDescriptor(t.view(n_rows * k, LINE), [n_rows * k, LINE], [LINE, 1],
                                                  [rb, LINE], line_layout()) for t in (x, y)]
    programs = min(n_rows, per_sm * sms)
    programs = triton.cdiv(n_rows, triton.cdiv(n_rows, programs))
    _softmax_smem[(programs,)](*descs, n_rows, K=k, RB=rb, NCH=k // rb, WARPS=warps, num_warps=warps)
    return y


def variants(dim):
    """(lines a chunk, warps, programs an SM): chunks of 2-16 KB, every warp a whole number of lines, one program
    an SM and as many as shared memory holds (at most 8)."""
    k = dim // LINE
    most = max(1, min(8, SMEM // (dim * 2)))
    out = []
    for rb in (8, 16, 32):
        for warps in (4, 8, 16):
            if rb > k or rb % warps or k % rb:
                continue
            for per_sm in sorted({1, most}):
                out.append((rb, warps, per_sm))
    return out


def offline():
    """Every variant compiled for sm_90a (no GPU): ptxas's registers and spills, and the shared memory taken."""
    print(f"triton {triton.__version__}, sm_90a")
    for rows, dim in SHAPES:
        for rb, warps, per_sm in variants(dim):
            k = dim // LINE
            desc = f"tensordesc<bf16[{rb},{LINE}],{line_layout()!r}>"
            sig = {"x_desc": desc, "y_desc": desc, "n_rows": "i32"}
            consts = {"K": k, "RB": rb, "NCH": k // rb, "WARPS": warps}
            label = f"{rows} x {dim}: {rb} lines a chunk, {warps} warps, {per_sm} an SM"
            try:
                kern = compile_sm90(_softmax_smem, sig, consts, (), warps)
            except Exception as e:
                print(label, "fails:", type(e).__name__, str(e)[:3000])
                continue
            print(label + ":", "; ".join(ptxas_info(kern)), f"| shared {kern.metadata.shared} B")


def max_rel(y, ref):
    return float((y.double() - ref).abs().max() / ref.abs().max())


def main():
    shapes, path, _ = command_line(SHAPES)
    out, dev = begin(path, False)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for rows, dim in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (3 * torch.randn(rows, dim, device=dev, generator=g)).bfloat16()
        ref = torch.softmax(x.double(), -1)
        lib_err = max_rel(SM.softmax_fwd(x), ref)
        emit(out, kind="check", shape=[rows, dim], impl="library", max_rel=lib_err)
        y_copy = torch.empty_like(x)
        calls = {(rows, dim, "library"): lambda: SM.softmax_fwd(x),
                 (rows, dim, "torch.softmax"): lambda: torch.softmax(x, -1),
                 (rows, dim, "copy"): lambda: y_copy.copy_(x)}
        for rb, warps, per_sm in variants(dim):
            name = f"smem {rb} lines a chunk, {warps} warps, {per_sm} an SM"
            try:
                y = smem_softmax(x, rb, warps, per_sm, sms, torch.full_like(x, float("nan")))
                torch.cuda.synchronize()
            except Exception as e:
                emit(out, kind="check", shape=[rows, dim], impl=name, error=f"{type(e).__name__}: {str(e)[:300]}")
                continue
            err = max_rel(y, ref)
            ok = err == err and err <= 2 * lib_err + 1e-3  # NaN: an element not written
            emit(out, kind="check", shape=[rows, dim], impl=name, max_rel=err, ok=ok)
            if ok:
                calls[(rows, dim, name)] = lambda rb=rb, warps=warps, per_sm=per_sm: smem_softmax(x, rb, warps,
                                                                                                  per_sm, sms)
        timed_rounds(out, calls, dev)


if __name__ == "__main__":
    if "--offline" in sys.argv:
        offline()
    else:
        main()
