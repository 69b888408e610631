"""The row kernels' one-tile-a-program path (STAGES=1): the interpreter's autotune config takes the pipelined
path (STAGES=3), so these launch the other one directly (odd rows and columns: row and column masks)."""
import pytest
import torch

from kernels import layernorm as LN
from kernels import rmsnorm as RN
from kernels import softmax as SM
from kernels._rows import row_block, row_grid

N_ROWS, N_COLS = 7, 45


def launch(kernel, *args, n_rows=N_ROWS, n_cols=N_COLS, rows=2, **chunk):
    block, single = row_block(n_cols)
    kernel.fn[row_grid(n_rows, torch.device("cpu"))](*args, BLOCK=block, SINGLE=single, ROWS=rows, STAGES=1,
                                                     num_warps=4, **chunk)


@pytest.fixture
def x():
    return torch.randn(N_ROWS, N_COLS, generator=torch.Generator().manual_seed(0))


FORWARD_PATHS = [dict(CHUNK=0), dict(CHUNK=16, rows=1), dict(CHUNK=16, rows=2)]  # whole rows; 16-wide chunks


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
    launch(LN._layernorm_fwd_kernel, x, w, b, y, mean, rstd, x.stride(0), y.stride(0), N_ROWS, N_COLS, 1e-5, **path)
    ref = torch.nn.functional.layer_norm(x.double(), (N_COLS,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y.double(), ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(mean.double(), x.double().mean(-1), rtol=1e-6, atol=0)
    torch.testing.assert_close(rstd.double(), 1 / (x.double().var(-1, unbiased=False) + 1e-5).sqrt(), rtol=1e-3,
                               atol=0)


def test_softmax_forward_and_backward_one_tile_a_program(x):
    y, dx = torch.empty_like(x), torch.empty_like(x)
    launch(SM._softmax_fwd_kernel, x, y, x.stride(0), y.stride(0), N_ROWS, N_COLS)
    ref = torch.softmax(x.double(), -1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-7)
    dy = torch.randn_like(x)
    launch(SM._softmax_bwd_kernel, y, dy, dx, y.stride(0), dy.stride(0), dx.stride(0), N_ROWS, N_COLS)
    torch.testing.assert_close(dx.double(), ref * (dy.double() - (ref * dy.double()).sum(-1, keepdim=True)),
                               rtol=1e-4, atol=1e-6)


def _backward(kernel, x, w, dy, stats, stages, n_partials=1, rows_per_program=3, rows=2, **chunk):
    """Launch a norm backward with `stages` over programs of rows_per_program rows (several programs, a partial
    last one); returns dx and the partial rows summed."""
    n_rows, n_cols = x.shape
    block, single = row_block(n_cols)
    programs = -(-n_rows // rows_per_program)
    dx = torch.empty_like(x)
    partials = [torch.full((programs, n_cols), float("nan")) for _ in range(n_partials)]  # every row written
    kernel.fn[(programs,)](x, w, dy, *stats, dx, *partials, x.stride(0), dy.stride(0), dx.stride(0), n_rows, n_cols,
                           rows_per_program, BLOCK=block, SINGLE=single, ROWS=rows, STAGES=stages, num_warps=4, **chunk)
    return dx, [p.sum(0) for p in partials]


@pytest.mark.parametrize("stages,chunk,rows", [(1, 0, 2), (3, 0, 2), (1, 16, 1), (1, 16, 2)])
def test_rmsnorm_backward_every_stages_path(x, stages, chunk, rows):
    """STAGES 1 plain, 3 tl.range pipelining, and a row that fits one block walked in 16-wide chunks instead (45
    columns: two full chunks and a partial one), one or two rows a step (3 rows a program: a partial pair):
    same dx and dw."""
    w, dy = torch.rand(N_COLS) + 0.5, torch.randn_like(x)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + 1e-6)
    dx, (dw,) = _backward(RN._rmsnorm_bwd_kernel, x, w, dy, (rstd,), stages, rows=rows, CHUNK=chunk)
    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_()
    (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr).backward(dy.double())
    torch.testing.assert_close(dx.double(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), wr.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("stages,chunk,rows", [(1, 0, 2), (3, 0, 2), (1, 16, 1), (1, 16, 2)])
def test_layernorm_backward_every_stages_path(x, stages, chunk, rows):
    w, dy = torch.rand(N_COLS) + 0.5, torch.randn_like(x)
    mean, rstd = x.mean(-1), torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)
    dx, (dw, db) = _backward(LN._layernorm_bwd_kernel, x, w, dy, (mean, rstd), stages, n_partials=2, rows=rows,
                               CHUNK=chunk)
    xr, wr, br = (t.double().requires_grad_() for t in (x, w, torch.zeros(N_COLS)))
    torch.nn.functional.layer_norm(xr, (N_COLS,), wr, br, 1e-5).backward(dy.double())
    torch.testing.assert_close(dx.double(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), wr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(db.double(), br.grad, rtol=1e-4, atol=1e-5)


def test_autotune_prune_keeps_chunked_configs_only_for_wide_rows():
    """On a GPU the norm backwards may walk 16K-wide rows (and longer ones) in chunks, one or two rows a step, at
    16 or 32 elements a thread; narrower rows never get a chunked config."""
    from kernels._rows import _sensible, gpu_configs

    def chunked(block, single):
        kept = _sensible(gpu_configs(chunks=True), {}, BLOCK=block, SINGLE=single)
        return sorted((c.kwargs["ROWS"], c.kwargs["CHUNK"], c.num_warps) for c in kept if c.kwargs["CHUNK"])

    expected = [(1, 4096, 4), (1, 4096, 8), (2, 2048, 4), (2, 2048, 8), (2, 4096, 8), (2, 4096, 16)]
    assert chunked(16384, True) == expected and chunked(16384, False) == expected
    assert chunked(4096, True) == [] and chunked(8192, True) == []
    whole = _sensible(gpu_configs(chunks=True), {}, BLOCK=4096, SINGLE=True)
    assert whole and all(c.kwargs["ROWS"] * 4096 // (32 * c.num_warps) in (16, 32) for c in whole)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_splits_few_long_rows_into_segments(dtype):
    """3 rows of 20000 are too few to fill the (CPU: 4) SMs: each is split into 4096-wide segments, two kernels
    forward and two backward. Row 1's first two segments are all -inf (their statistics must not give NaN)."""
    assert SM.row_segments(3, 20000, torch.device("cpu")) == (5, 4096)
    assert SM.row_segments(3, 16384, torch.device("cpu")) == (1, 16384)  # fits one block: never split
    assert SM.row_segments(8, 20000, torch.device("cpu")) == (1, 20000)  # 2 rows an SM (CPU: 4 "SMs"): not split
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


def test_softmax_long_rows_one_program_each():
    """Rows longer than a block, enough of them not to be split (on a GPU, 1056+ rows): one program walks each
    row in 16K chunks (two passes forward, two backward)."""
    x = torch.randn(3, 16500, generator=torch.Generator().manual_seed(2))
    y, dx = torch.empty_like(x), torch.empty_like(x)
    launch(SM._softmax_fwd_kernel, x, y, x.stride(0), y.stride(0), 3, 16500, n_rows=3, n_cols=16500, rows=1)
    ref = torch.softmax(x.double(), -1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-9)
    dy = torch.randn_like(x)
    launch(SM._softmax_bwd_kernel, y, dy, dx, y.stride(0), dy.stride(0), dx.stride(0), 3, 16500, n_rows=3,
           n_cols=16500, rows=1)
    torch.testing.assert_close(dx.double(), ref * (dy.double() - (ref * dy.double()).sum(-1, keepdim=True)),
                               rtol=1e-4, atol=1e-8)
