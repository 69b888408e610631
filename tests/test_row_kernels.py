"""The row kernels' one-tile-a-program path (STAGES=1): the interpreter's autotune config takes the pipelined
path (STAGES=3), so these launch the other one directly (odd rows and columns: row and column masks)."""
import types

import pytest
import torch

from kernels import layernorm as LN
from kernels import rmsnorm as RN
from kernels import softmax as SM
from kernels._rows import row_block, row_grid

N_ROWS, N_COLS = 7, 45


def launch(kernel, *args, n_rows=N_ROWS, n_cols=N_COLS, rows=2, chunk=0, **extra):
    """One tile a program; with `chunk`, rows walked chunk-wide as rows longer than a block are."""
    block, single = (chunk, False) if chunk else row_block(n_cols)
    kernel.fn[row_grid(n_rows, torch.device("cpu"))](*args, BLOCK=block, SINGLE=single, ROWS=rows, STAGES=1,
                                                     num_warps=4, **extra)


@pytest.fixture
def x():
    return torch.randn(N_ROWS, N_COLS, generator=torch.Generator().manual_seed(0))


# whole rows; 16-wide chunks; one row a program in passes of four chunks a block (45 of 64: 16, 16, 13)
FORWARD_PATHS = [dict(PASSES=False), dict(chunk=16, rows=1, PASSES=False), dict(chunk=16, rows=2, PASSES=False),
                 dict(rows=1, PASSES=True)]


@pytest.mark.parametrize("path", FORWARD_PATHS)
def test_rmsnorm_forward_one_tile_a_program(x, path):
    w = torch.rand(N_COLS) + 0.5
    y, rstd = torch.empty_like(x), torch.empty(N_ROWS)
    launch(RN._rmsnorm_fwd_kernel, x, w, y, rstd, x.stride(0), y.stride(0), N_ROWS, N_COLS, 1e-6, **path)
    ref_rstd = torch.rsqrt(x.double().pow(2).mean(-1) + 1e-6)
    torch.testing.assert_close(rstd.double(), ref_rstd, rtol=1e-5, atol=0)
    torch.testing.assert_close(y.double(), x.double() * ref_rstd[:, None] * w.double(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", FORWARD_PATHS)
def test_layernorm_forward_one_tile_a_program(x, path):
    """Rows offset by 1000: fp32 rounding of x - mean alone costs ~1e-4 here, while a variance taken as a sum of
    squares minus the squared mean would be off by ~6% (squares 1e6 times the variance); chunked, the variance
    is merged chunk by chunk and stays within the 1e-3 tolerance."""
    x = x + 1000.0
    w, b = torch.rand(N_COLS) + 0.5, torch.randn(N_COLS)
    y, mean, rstd = torch.empty_like(x), torch.empty(N_ROWS), torch.empty(N_ROWS)
    launch(LN._layernorm_fwd_kernel, x, w, b, y, mean, rstd, x.stride(0), y.stride(0), N_ROWS, N_COLS, 1e-5,
           CHUNK=16, **path)  # CHUNK: the passes' chunk, a quarter of the 64-wide block as on a GPU
    ref = torch.nn.functional.layer_norm(x.double(), (N_COLS,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y.double(), ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(mean.double(), x.double().mean(-1), rtol=1e-6, atol=0)
    torch.testing.assert_close(rstd.double(), 1 / (x.double().var(-1, unbiased=False) + 1e-5).sqrt(), rtol=1e-3,
                               atol=0)


def test_softmax_forward_and_backward_one_tile_a_program(x):
    y, dx = torch.empty_like(x), torch.empty_like(x)
    launch(SM._softmax_fwd_kernel, x, y, x.stride(0), y.stride(0), N_ROWS, N_COLS, SCALAR=False)
    ref = torch.softmax(x.double(), -1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-7)
    dy = torch.randn_like(x)
    launch(SM._softmax_bwd_kernel, y, dy, dx, y.stride(0), dy.stride(0), dx.stride(0), N_ROWS, N_COLS, SCALAR=False)
    torch.testing.assert_close(dx.double(), ref * (dy.double() - (ref * dy.double()).sum(-1, keepdim=True)),
                               rtol=1e-4, atol=1e-6)


def test_softmax_forward_16k_wide_rows_one_reduction_a_row():
    """Rows in a 16K block, one a program (as on a GPU): the in-thread groups' (max, sum) merged in one block
    reduction (_softmax_fwd_row). 10000 columns: the last groups masked, one partly; row 1's first 8193 columns
    -inf (whole groups of -inf and one group partly -inf, no NaN from inf - inf)."""
    x = torch.randn(3, 10000, generator=torch.Generator().manual_seed(3)) * 3
    x[1, :8193] = float("-inf")
    y = torch.empty_like(x)
    assert row_block(10000) == (16384, True)
    launch(SM._softmax_fwd_kernel, x, y, x.stride(0), y.stride(0), 3, 10000, n_rows=3, n_cols=10000, rows=1,
           SCALAR=False)
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-9)


def _backward(kernel, x, w, dy, stats, stages, n_partials=1, rows_per_program=3, rows=2, chunk=0, **extra):
    """Launch a norm backward with `stages` over programs of rows_per_program rows (several programs, a partial
    last one), rows walked chunk-wide with `chunk`; returns dx and the partial rows summed."""
    n_rows, n_cols = x.shape
    block, single = (chunk, False) if chunk else row_block(n_cols)
    programs = -(-n_rows // rows_per_program)
    dx = torch.empty_like(x)
    partials = [torch.full((programs, n_cols), float("nan")) for _ in range(n_partials)]  # every row written
    grid = (programs * (2 if extra.get("SPLIT") else 1),)  # SPLIT: two programs a row range
    kernel.fn[grid](x, w, dy, *stats, dx, *partials, x.stride(0), dy.stride(0), dx.stride(0), n_rows, n_cols,
                    rows_per_program, BLOCK=block, SINGLE=single, ROWS=rows, STAGES=stages, num_warps=4, **extra)
    return dx, [p.sum(0) for p in partials]


@pytest.mark.parametrize("stages,chunk,rows", [(1, 0, 2), (3, 0, 2), (1, 16, 1), (1, 16, 2)])
def test_rmsnorm_backward_every_stages_path(x, stages, chunk, rows):
    """STAGES 1 plain, 3 tl.range pipelining, and rows walked in 16-wide chunks as rows longer than a block are
    (45 columns: two full chunks and a partial one), one or two rows a step (3 rows a program: a partial pair):
    same dx and dw."""
    w, dy = torch.rand(N_COLS) + 0.5, torch.randn_like(x)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + 1e-6)
    dx, (dw,) = _backward(RN._rmsnorm_bwd_kernel, x, w, dy, (rstd,), stages, rows=rows, chunk=chunk)
    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_()
    (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr).backward(dy.double())
    torch.testing.assert_close(dx.double(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), wr.grad, rtol=1e-4, atol=1e-5)


def _layernorm_grads(x, w, b, dy):
    """float64 reference (dx, dw, db) of layernorm (eps 1e-5) over x's last dim."""
    xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
    y = torch.nn.functional.layer_norm(xr, x.shape[-1:], wr, br, 1e-5)
    return torch.autograd.grad(y, (xr, wr, br), dy.double())


@pytest.mark.parametrize("stages,chunk,rows,split", [(1, 0, 2, False), (3, 0, 2, False), (1, 0, 1, True),
                                                      (3, 0, 1, True), (1, 16, 1, False), (1, 16, 2, False)])
def test_layernorm_backward_every_stages_path(x, stages, chunk, rows, split):
    """As rmsnorm's, and SPLIT: two programs a row range, each owning half the columns (45 of a 64-wide block: the
    second half partly masked) and reading the other half for the row sums."""
    w, dy = torch.rand(N_COLS) + 0.5, torch.randn_like(x)
    mean, rstd = x.mean(-1), torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)
    dx, (dw, db) = _backward(LN._layernorm_bwd_kernel, x, w, dy, (mean, rstd), stages, n_partials=2, rows=rows,
                               chunk=chunk, SPLIT=split)
    ref_dx, ref_dw, ref_db = _layernorm_grads(x, w, torch.zeros(N_COLS), dy)
    torch.testing.assert_close(dx.double(), ref_dx, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), ref_dw, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(db.double(), ref_db, rtol=1e-4, atol=1e-5)


def test_autotune_prune_holds_rows_that_fit_a_block_whole():
    """On a GPU every config the prune keeps holds 16 or 32 elements of its tile a thread; several rows a tile and
    pipelining only for rows that fit a block (16K-wide rows: one row, 16 or 32 warps)."""
    from kernels._rows import SCALAR_STATS as SCALAR, _sensible, gpu_configs

    def kept(block, single):
        return sorted((c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"])
                      for c in _sensible(gpu_configs(), {}, BLOCK=block, SINGLE=single))

    assert kept(16384, True) == [(1, 16, 1), (1, 32, 1)] == kept(16384, False)
    # rmsnorm's backward (wide_stages) may pipeline one 16K-wide row a step
    assert sorted((c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"])
                  for c in _sensible(gpu_configs(), {}, wide_stages=True, BLOCK=16384, SINGLE=True)) == [
        (1, 16, 1), (1, 16, 3), (1, 32, 1), (1, 32, 3)]

    # layernorm's backward launched with SPLIT (one whole 16K row a step): each program's 8K half counted as its
    # tile, so 8 or 16 warps, pipelined or not
    assert sorted((c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"])
                  for c in _sensible(gpu_configs(), {}, BLOCK=16384, SINGLE=True, SPLIT=True)) == [
        (1, 8, 1), (1, 8, 3), (1, 16, 1), (1, 16, 3)]

    # layernorm's forward over 16K-wide rows in passes: the warps that load a CHUNK-wide chunk at 16 bytes a
    # thread, untuned; rmsnorm's tuned between 16 and 32
    from kernels.layernorm import _layernorm_fwd_kernel
    from kernels.rmsnorm import _rmsnorm_fwd_kernel

    def pruned(kernel, passes, chunk=4096, dtype=torch.bfloat16):  # CHUNK, X: as layernorm launches it
        return sorted((c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"])
                      for c in kernel.early_config_prune(gpu_configs(), {"X": torch.empty(0, dtype=dtype)},
                                                         BLOCK=16384, SINGLE=True, PASSES=passes, CHUNK=chunk))

    # 16 bytes a thread a chunk
    assert pruned(_layernorm_fwd_kernel, True) == [(1, 16, 1)]
    assert pruned(_layernorm_fwd_kernel, True, chunk=8192) == [(1, 32, 1)]
    assert pruned(_layernorm_fwd_kernel, True, dtype=torch.float32) == [(1, 32, 1)]
    assert pruned(_rmsnorm_fwd_kernel, True) == [(1, 16, 1), (1, 32, 1)] == pruned(_layernorm_fwd_kernel, False)

    def with_scalar(block, single):  # as the softmax kernels are tuned
        return sorted((c.kwargs["ROWS"], c.num_warps, c.kwargs["STAGES"])
                      for c in _sensible(gpu_configs(SCALAR), {}, long_stages=True, option=SCALAR, BLOCK=block,
                                         SINGLE=single)
                      if c.kwargs[SCALAR.name])

    # softmax's SCALAR only for rows longer than a block
    assert with_scalar(16384, False) == [(1, 16, 1), (1, 16, 3), (1, 32, 1), (1, 32, 3)]
    assert with_scalar(16384, True) == [] == with_scalar(4096, True)
    for block in (1024, 4096):
        configs = kept(block, True)
        assert configs and all(r * max(block, 1) // (32 * w) in (16, 32) for r, w, _ in configs)
        assert any(s == 3 for _, _, s in configs)


def test_partials_sum_into_the_weights_dtype():
    """The norm backwards' [k, programs, dim] fp32 partials: summed over programs (dim past one column block; past
    SUM_STEP_ROWS partial rows, more than one step and a partial one) into [k, dim] of the weights' dtype."""
    from kernels._rows import SUM_STEP_ROWS, sum_partials

    for shape in ((2, 19, 300), (2, 130, 100), (1, SUM_STEP_ROWS + 37, 45)):
        partials = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
        for dtype in (torch.float32, torch.bfloat16):
            got = sum_partials(partials, dtype)
            assert got.shape == (shape[0], shape[2]) and got.dtype == dtype
            # fp32 sums of n terms of about 1: each addition may round by 6e-8 of the running sum
            torch.testing.assert_close(got.double(), partials.double().sum(1).to(dtype).double(),
                                       rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-7 * shape[1])


def test_partial_rows_sum_in_one_step():
    """Every partial-row count a backward launches (up to four programs an SM) is summed in one step of BP rows, with
    enough columns a program to fill its warps (1024 elements a warp at 8 warps, 4096 at 4 for 16K-wide rows): in
    64-row steps, 241 partial rows made rmsnorm's backward 5.5-6 us slower at 4092 x 4096 on an H200 (session 37);
    at 16K-wide rows 64 columns a program beat 16-32 (session 38)."""
    from kernels._rows import SUM_STEP_ROWS, sum_tiling

    for n_programs in (1, 66, 128, 132, 233, 241, 256, 264, 525, 528, SUM_STEP_ROWS):
        for n_cols in (768, 2048, 4096, 16384, 65536):
            bn, bp, warps = sum_tiling(n_programs, n_cols)
            assert n_programs <= bp < 2 * n_programs
            assert 8 <= bn <= 64 and warps in (4, 8), (n_programs, n_cols, bn, bp, warps)
            per_warp = 4096 if warps == 4 else 1024
            assert warps == (4 if n_cols > 8192 else 8), (n_programs, n_cols, warps)
            assert bp * bn == per_warp * warps or bn in (8, 64), (n_programs, n_cols, bn, bp, warps)
    assert sum_tiling(SUM_STEP_ROWS + 1, 4096)[1] == SUM_STEP_ROWS  # more rows: steps of SUM_STEP_ROWS
    assert sum_tiling(256, 4096) == (32, 256, 8) and sum_tiling(132, 16384) == (64, 256, 4)
    assert sum_tiling(3, 5)[0] == 8 and sum_tiling(3, 3)[0] == 4  # at most the row's width (a power of two)


def test_dependent_launch_only_where_compiled_for_a_gpu(monkeypatch):
    """The partial-row sum and the split softmax's second kernel wait in gdc_wait as programmatic dependent
    launches only when compiled for a CUDA device: the interpreter has no grid dependency control, so on the CPU
    (interpreted or not) they are plain launches, which the tests here run."""
    from kernels import _rows

    assert not _rows.dependent_launch(torch.device("cpu"))
    monkeypatch.setattr(_rows, "INTERPRETED", False)
    assert not _rows.dependent_launch(torch.device("cpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_splits_few_long_rows_into_segments(dtype):
    """3 rows of 20000 are too few to fill the (CPU: 4) SMs: each is split into 4096-wide segments, two kernels
    forward and two backward. Row 1's first two segments are all -inf (their statistics must not give NaN)."""
    assert SM.row_segments(3, 20000, torch.device("cpu")) == (5, 4096)
    assert SM.row_segments(3, 100000, torch.device("cpu")) == (25, 4096)  # one chunk a segment (see its docstring)
    assert SM.row_segments(3, 16384, torch.device("cpu")) == (1, 16384)  # fits one block: never split
    assert SM.row_segments(4, 20000, torch.device("cpu")) == (1, 20000)  # a row an SM (CPU: 4 "SMs"): not split
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(3, 20000, generator=g) * 4).to(dtype)
    x[1, :8192] = float("-inf")
    y = SM.softmax_fwd(x)
    ref = torch.softmax(x.double(), -1)
    tol = dict(rtol=1e-5, atol=1e-8) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-5)
    torch.testing.assert_close(y.double(), ref, **tol)
    dy = torch.randn(3, 20000, generator=g).to(dtype)
    dx = SM.softmax_bwd(dy, y)
    yd = y.double()
    torch.testing.assert_close(dx.double(), yd * (dy.double() - (yd * dy.double()).sum(-1, keepdim=True)), **tol)


@pytest.mark.parametrize("scalar", [False, True])
def test_softmax_long_rows_one_program_each(scalar):
    """Rows longer than a block, enough of them not to be split (on a GPU, 133+ rows): one program walks each row
    in chunks (4096-wide here: two passes forward, two backward), its running max and sum a lane each or
    (SCALAR) one pair. Row 1's first two chunks are all -inf (no NaN from inf - inf)."""
    x = torch.randn(3, 16500, generator=torch.Generator().manual_seed(2))
    x[1, :8192] = float("-inf")
    y, dx = torch.empty_like(x), torch.empty_like(x)
    launch(SM._softmax_fwd_kernel, x, y, x.stride(0), y.stride(0), 3, 16500, n_rows=3, n_cols=16500, rows=1,
           chunk=4096, SCALAR=scalar)
    ref = torch.softmax(x.double(), -1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-9)
    dy = torch.randn_like(x)
    launch(SM._softmax_bwd_kernel, y, dy, dx, y.stride(0), dy.stride(0), dx.stride(0), 3, 16500, n_rows=3,
           n_cols=16500, rows=1, chunk=4096, SCALAR=scalar)
    torch.testing.assert_close(dx.double(), ref * (dy.double() - (ref * dy.double()).sum(-1, keepdim=True)),
                               rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("n_cols", [45, 10000, 16500])  # whole rows; passes over 4K chunks; 16K chunks
def test_norm_forwards_without_stats_give_the_same_output(n_cols):
    """Through the launchers, each row path (row_passes picks the passes for 8K-16K rows): y as the float64
    reference, and with no backward to follow (no grad, or `out`) the same y with the statistics neither written
    nor returned."""
    from kernels._rows import row_passes
    assert row_passes(*row_block(n_cols)) == (n_cols == 10000)
    x = torch.randn(5, n_cols, generator=torch.Generator().manual_seed(1))
    w, b = torch.rand(n_cols) + 0.5, torch.randn(n_cols)
    y, mean, rstd = LN.layernorm_fwd(x, w, b)
    ref = torch.nn.functional.layer_norm(x.double(), (n_cols,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y.double(), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mean.double(), x.double().mean(-1), rtol=1e-5, atol=1e-6)
    y_only, no_mean, no_rstd = LN.layernorm_fwd(x, w, b, stats=False)
    assert no_mean is None and no_rstd is None and mean.shape == rstd.shape == (5,)
    torch.testing.assert_close(y_only, y, rtol=0, atol=0)
    torch.testing.assert_close(LN.layernorm(x, w, b), y, rtol=0, atol=0)  # no grad: the stats-free path
    y, rstd = RN.rmsnorm_fwd(x, w)
    ref_rstd = torch.rsqrt(x.double().pow(2).mean(-1) + 1e-6)
    torch.testing.assert_close(y.double(), x.double() * ref_rstd[:, None] * w.double(), rtol=1e-4, atol=1e-5)
    y_only, no_rstd = RN.rmsnorm_fwd(x, w, stats=False)
    assert no_rstd is None and rstd.shape == (5,)
    torch.testing.assert_close(y_only, y, rtol=0, atol=0)
    torch.testing.assert_close(RN.rmsnorm(x, w, out=torch.empty_like(x)), y, rtol=0, atol=0)


def test_reduction_programs_fewer_for_wider_rows(monkeypatch):
    """Programs for the norm backwards: up to 4 an SM at 768-wide rows, 2 at 4096, 1 at 16K (each a partial row
    to write and sum), at least 16 rows each once every SM has one; half a row range an SM for layernorm's split;
    every row in exactly one program."""
    from kernels import _rows
    monkeypatch.setattr(_rows, "sm_count", lambda device: 132)
    cpu = torch.device("cpu")
    assert _rows.reduction_programs(65536, 1024, cpu) == (525, 125)  # 4 an SM, 125 rows each (the last 36)
    assert _rows.reduction_programs(65536, 4096, cpu) == (264, 249)
    assert _rows.reduction_programs(65536, 16384, cpu) == (132, 497)
    assert _rows.reduction_programs(4096, 4096, cpu) == (256, 16)  # at least 16 rows each
    assert _rows.reduction_programs(1024, 16384, cpu) == (128, 8)  # one an SM: 16 rows each would idle SMs
    assert _rows.reduction_programs(5, 16384, cpu) == (5, 1)
    # layernorm's split: two programs a row range, one resident an SM, so half a range an SM (one wave)
    assert _rows.split_columns(16384, True) and not _rows.split_columns(16384, False)
    assert not _rows.split_columns(8192, True)
    assert _rows.reduction_programs(65536, 16384, cpu, split=True) == (66, 993)
    assert _rows.reduction_programs(4096, 16384, cpu, split=True) == (66, 63)
    assert _rows.reduction_programs(1024, 16384, cpu, split=True) == (64, 16)
    assert _rows.reduction_programs(5, 16384, cpu, split=True) == (5, 1)
    for n_rows, block, split in ((65536, 1024, False), (1000, 4096, False), (16384, 16384, False),
                                 (131, 768, False), (16384, 16384, True), (1000, 16384, True)):
        programs, per = _rows.reduction_programs(n_rows, block, cpu, split)
        assert (programs - 1) * per < n_rows <= programs * per


def test_layernorm_backward_splits_16k_rows_end_to_end():
    """Through layernorm_bwd as the autograd function calls it: 16K-wide rows take the split (two programs a row
    range, half a range an SM; five rows over the interpreter's stand-in SMs: ranges of unequal length), and dx,
    dw, db match float64."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(5, 16000, generator=gen) + 0.5
    w, dy = torch.rand(16000, generator=gen) + 0.5, torch.randn(5, 16000, generator=gen)
    _, mean, rstd = LN.layernorm_fwd(x, w, torch.zeros(16000))
    dx, dw, db = LN.layernorm_bwd(dy, x, w, mean, rstd)
    ref_dx, ref_dw, ref_db = _layernorm_grads(x, w, torch.zeros(16000), dy)
    torch.testing.assert_close(dx.double(), ref_dx, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), ref_dw, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(db.double(), ref_db, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n_rows,n_cols", [(37, 300), (5, 16000)])
def test_layernorm_backward_holds_fp32_tolerance_far_from_zero_mean(n_rows, n_cols):
    """Rows of mean 100 and spread 1 in fp32, through the one-program loop (300 wide) and the split (16000): the
    backward's xhat, x * rstd - mean * rstd as one FMA, keeps dx, dw, db within the component's fp32 gradient
    tolerance (2e-5 of the largest |ref|) of float64."""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(n_rows, n_cols, generator=gen) + 100
    w, dy = 1 + 0.1 * torch.randn(n_cols, generator=gen), torch.randn(n_rows, n_cols, generator=gen)
    b = 0.1 * torch.randn(n_cols, generator=gen)
    _, mean, rstd = LN.layernorm_fwd(x, w, b)
    got = LN.layernorm_bwd(dy, x, w, mean, rstd)
    for name, a, r in zip(("dx", "dw", "db"), got, _layernorm_grads(x, w, b, dy)):
        err = float((a.double() - r).abs().max() / r.abs().max())
        assert err <= 2e-5, f"{name}: {err:.2e}"


@pytest.mark.parametrize("layout", ["permuted", "column slice"])
def test_row_kernels_take_inputs_of_any_layout(layout):
    """A permuted x (dense, the last dim not unit-stride) and a slice of a wider one (rows further apart than
    their length), through the differentiable functions: y, dx (and dw, db) match float64 as for a contiguous x,
    and y is returned contiguous."""
    gen = torch.Generator().manual_seed(7)
    if layout == "permuted":
        base = torch.randn(45, 2, 3, generator=gen).permute(1, 2, 0)  # [2, 3, 45], strides (3, 1, 6)
    else:
        base = torch.randn(2, 3, 60, generator=gen)[..., 5:50]  # [2, 3, 45], rows 60 apart
    assert not base.is_contiguous()
    w, b = torch.rand(45, generator=gen) + 0.5, torch.randn(45, generator=gen)
    dy = torch.randn(2, 3, 45, generator=gen)
    cases = {
        "rmsnorm": (lambda x, w, b: RN.rmsnorm(x, w),
                    lambda x, w, b: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
        "layernorm": (LN.layernorm, lambda x, w, b: torch.nn.functional.layer_norm(x, (45,), w, b, 1e-5)),
        "softmax": (lambda x, w, b: SM.softmax(x), lambda x, w, b: torch.softmax(x, -1)),
    }
    for name, (fn, ref_fn) in cases.items():
        x, wg, bg = (t.detach().requires_grad_() for t in (base, w, b))  # x keeps base's strides
        xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
        y, ref = fn(x, wg, bg), ref_fn(xr, wr, br)
        assert y.is_contiguous(), name
        torch.testing.assert_close(y.double(), ref, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
        grads = torch.autograd.grad(y, (x, wg, bg), dy, allow_unused=True)
        refs = torch.autograd.grad(ref, (xr, wr, br), dy.double(), allow_unused=True)
        for got, want in zip(grads, refs):
            assert (got is None) == (want is None), name
            if want is not None:
                torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def _refused_calls(dtype):
    from kernels import attention as A
    from kernels import matmul as M

    x, ok, w = torch.ones(3, 8).to(dtype), torch.ones(3, 8), torch.ones(8)
    qkv = [torch.ones(1, 1, 4, 8).to(dtype) for _ in range(3)]
    return {
        "rmsnorm": lambda: RN.rmsnorm(x, w),
        "rmsnorm_bwd": lambda: RN.rmsnorm_bwd(x, ok, w, torch.ones(3)),  # dy of the dtype
        "layernorm": lambda: LN.layernorm(x, w, w),
        "layernorm_bwd": lambda: LN.layernorm_bwd(x, ok, w, torch.zeros(3), torch.ones(3)),
        "softmax": lambda: SM.softmax(x),
        "softmax_bwd": lambda: SM.softmax_bwd(x, ok),
        "matmul": lambda: M.matmul(x, x.t()),
        "attention": lambda: A.flash_attention(*qkv),
    }


@pytest.mark.parametrize("name", list(_refused_calls(torch.float64)))
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_kernels_refuse_dtypes_they_cannot_compute(name, dtype):
    """The kernels compute in fp32: a float64 input would come back at fp32's precision (rel err ~1e-7 where the
    caller asked for ~1e-16) and an integer one as garbage, both without a word. Each launcher raises instead,
    naming the dtype, forward and backward."""
    with pytest.raises(ValueError, match=f"dtype {dtype} is not supported"):
        _refused_calls(dtype)[name]()


@pytest.mark.parametrize("case", ["dy rows", "dy cols", "weight", "stat"])
def test_backwards_refuse_inputs_that_disagree(case):
    """The backward launchers are public (kernels.rmsnorm.rmsnorm_bwd, ...) and index dy, w and the saved
    statistics by x's rows and columns: a dy, w or statistic of another size would be read past its end. Each
    raises instead; a 0-d x (no rows' length) too."""
    x, w = torch.randn(3, 8), torch.ones(8)
    dy = {"dy rows": torch.randn(2, 8), "dy cols": torch.randn(3, 4)}.get(case, torch.randn(3, 8))
    w_in = torch.ones(5) if case == "weight" else w
    stat = torch.ones(2) if case == "stat" else torch.ones(3)
    with pytest.raises(ValueError, match="dy has shape|weight shape|saved statistic"):
        RN.rmsnorm_bwd(dy, x, w_in, stat)
    with pytest.raises(ValueError, match="dy has shape|weight shape|saved statistic"):
        LN.layernorm_bwd(dy, x, w_in, torch.zeros(3), stat)
    if case.startswith("dy"):
        with pytest.raises(ValueError, match="dy has shape"):
            SM.softmax_bwd(dy, torch.softmax(x, -1))
    for fn in (lambda t: RN.rmsnorm(t, torch.ones(1)), lambda t: LN.layernorm(t, torch.ones(1), torch.ones(1)),
               SM.softmax):
        with pytest.raises(ValueError, match="at least one dimension"):
            fn(torch.tensor(1.0))


H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("gpu, dtype, rows, chunk", [
    (H100, torch.bfloat16, 4096, 8192), (H100, torch.bfloat16, 1536, 8192), (H100, torch.bfloat16, 1024, 4096),
    (H100, torch.float16, 65536, 8192), (H100, torch.float32, 65536, 16384), (H100, torch.float32, 4096, 16384),
    (H100, torch.float32, 2048, 16384), (H100, torch.float32, 1536, 4096), (H100, torch.float64, 65536, 4096),
    ("NVIDIA H200", torch.bfloat16, 65536, 4096), (None, torch.bfloat16, 65536, 4096)])
def test_layernorm_passes_chunk_by_card_dtype_and_rows(monkeypatch, gpu, dtype, rows, chunk):
    """16K-wide layernorm forwards walk 8K chunks (at 32 warps) for 2-byte rows on an H100 from 1536 rows, one 16K
    chunk for 4-byte rows there from 2048 rows, 4K elsewhere and in fp64 (the measurements are in _passes_chunk's
    docstring); None: a CPU tensor, as the interpreter runs them. The card is asked by name (patched), so a stand-in
    tensor with a CUDA device is enough."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: gpu)
    LN._is_h100.cache_clear()
    try:
        device = torch.device("cuda", 0) if gpu else torch.device("cpu")
        x = types.SimpleNamespace(device=device, element_size=lambda: torch.empty(0, dtype=dtype).element_size())
        assert LN._passes_chunk(x, rows) == chunk
    finally:
        LN._is_h100.cache_clear()  # later tests ask the real card
