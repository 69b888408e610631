"""The row kernels' one-tile-a-program path (STAGES=1): the interpreter's autotune config takes the pipelined
path (STAGES=3), so these launch the other one directly (odd rows and columns: row and column masks)."""
import pytest
import torch

from kernels import layernorm as LN
from kernels import rmsnorm as RN
from kernels import softmax as SM
from kernels._rows import row_block, row_grid

N_ROWS, N_COLS = 7, 45


def launch(kernel, *args, n_rows=N_ROWS, n_cols=N_COLS):
    block, single = row_block(n_cols)
    kernel.fn[row_grid(n_rows, torch.device("cpu"))](*args, BLOCK=block, SINGLE=single, ROWS=2, STAGES=1,
                                                     num_warps=4)


@pytest.fixture
def x():
    return torch.randn(N_ROWS, N_COLS, generator=torch.Generator().manual_seed(0))


def test_rmsnorm_forward_one_tile_a_program(x):
    w = torch.rand(N_COLS) + 0.5
    y, rstd = torch.empty_like(x), torch.empty(N_ROWS)
    launch(RN._rmsnorm_fwd_kernel, x, w, y, rstd, x.stride(0), y.stride(0), N_ROWS, N_COLS, 1e-6)
    ref_rstd = torch.rsqrt(x.double().pow(2).mean(-1) + 1e-6)
    torch.testing.assert_close(rstd.double(), ref_rstd, rtol=1e-5, atol=0)
    torch.testing.assert_close(y.double(), x.double() * ref_rstd[:, None] * w.double(), rtol=1e-5, atol=1e-6)


def test_layernorm_forward_one_tile_a_program(x):
    w, b = torch.rand(N_COLS) + 0.5, torch.randn(N_COLS)
    y, mean, rstd = torch.empty_like(x), torch.empty(N_ROWS), torch.empty(N_ROWS)
    launch(LN._layernorm_fwd_kernel, x, w, b, y, mean, rstd, x.stride(0), y.stride(0), N_ROWS, N_COLS, 1e-5)
    ref = torch.nn.functional.layer_norm(x.double(), (N_COLS,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mean.double(), x.double().mean(-1), rtol=1e-5, atol=1e-6)


def test_softmax_forward_and_backward_one_tile_a_program(x):
    y, dx = torch.empty_like(x), torch.empty_like(x)
    launch(SM._softmax_fwd_kernel, x, y, x.stride(0), y.stride(0), N_ROWS, N_COLS)
    ref = torch.softmax(x.double(), -1)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-7)
    dy = torch.randn_like(x)
    launch(SM._softmax_bwd_kernel, y, dy, dx, y.stride(0), dy.stride(0), dx.stride(0), N_ROWS, N_COLS)
    torch.testing.assert_close(dx.double(), ref * (dy.double() - (ref * dy.double()).sum(-1, keepdim=True)),
                               rtol=1e-4, atol=1e-6)
