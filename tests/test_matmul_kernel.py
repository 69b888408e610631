"""The GEMM launcher's tf32 path on Hopper (taken here by standing in for the device check): operands that are not
K-major, or whose rows are not 16 elements aligned, are copied into K-major aligned buffers before the kernel, and
the products stay those of the operands given; unless switched off, 16-bit and tf32 products go through
descriptors of the operands as stored, and through pointers where a descriptor cannot take one."""
import os
import subprocess
import sys

import pytest
import torch
import triton

from kernels import matmul as km


class Launches:
    """Stands in for the autotuned kernel: records each launch's operands, then launches the real one."""

    def __init__(self, kernel):
        self.kernel, self.seen = kernel, []

    def __getitem__(self, grid):
        def launch(a, b, c, m, n, k, sam, sak, sbk, sbn, *rest, **meta):
            self.seen.append({"a": (a.data_ptr(), sam, sak), "b": (b.data_ptr(), sbk, sbn)})
            return self.kernel[grid](a, b, c, m, n, k, sam, sak, sbk, sbn, *rest, **meta)
        return launch


@pytest.fixture
def launches(monkeypatch):
    rec = Launches(km._matmul_kernel)
    monkeypatch.setattr(km, "_matmul_kernel", rec)
    return rec


@pytest.fixture
def pointers(monkeypatch, launches):
    """The pointer kernel's launches, descriptors switched off: the operands copied (or not) are the same for
    either kernel, and this one's launch shows them whatever C's alignment."""
    monkeypatch.setattr(km, "TMA", False)
    return launches


def operands(layout, k, m=37, n=29):
    """a [m, k] and b [k, n] in the layout named: "kn" K-major both (the kernel's own), "nk" a row-major B, "mn" A^T
    and a row-major B as the backward's dB = A^T @ dC has them."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g) if layout != "mn" else torch.randn(k, m, generator=g).t()
    b = torch.randn(k, n, generator=g) if layout != "kn" else torch.randn(n, k, generator=g).t()
    return a, b


def as_given(a, b):
    return {"a": (a.data_ptr(), *a.stride()), "b": (b.data_ptr(), *b.stride())}


@pytest.mark.parametrize("layout", ["kn", "nk", "mn"])
def test_tf32_on_hopper_copies_operands_k_major_aligned(monkeypatch, pointers, layout):
    monkeypatch.setattr(km, "_wgmma", lambda device: True)
    a, b = operands(layout, k=45)  # "kn" too: K-major, but its rows 45 elements apart
    c = km.matmul_fwd(a, b, "tf32")
    [seen] = pointers.seen
    assert (seen["a"][1:], seen["b"][1:]) == ((48, 1), (1, 48))
    assert seen["a"][0] != a.data_ptr() and seen["b"][0] != b.data_ptr()
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=0, atol=5e-3 * ref.abs().max())


def test_tf32_on_hopper_takes_k_major_aligned_operands_as_they_are(monkeypatch, pointers):
    monkeypatch.setattr(km, "_wgmma", lambda device: True)
    a, b = operands("kn", k=48)
    km.matmul_fwd(a, b, "tf32")
    assert pointers.seen == [as_given(a, b)]


@pytest.mark.parametrize("precision", ["ieee", "tf32"])
def test_operands_kept_as_given_off_hopper(launches, precision):
    a, b = operands("mn", k=45)  # on the CPU, and for ieee products anywhere, no copy
    km.matmul_fwd(a, b, precision)
    assert launches.seen == [as_given(a, b)]


def test_bf16_never_copied_on_hopper(monkeypatch, pointers):
    monkeypatch.setattr(km, "_wgmma", lambda device: True)
    a, b = (t.bfloat16() for t in operands("mn", k=45))  # wgmma transposes 16-bit operands itself
    km.matmul_fwd(a, b, "tf32")
    assert pointers.seen == [as_given(a, b)]


def test_4_byte_tiles_offered_to_4_byte_operands_only():
    other = triton.Config({"BM": 64, "BN": 64, "BK": 32, "GROUP": 8}, num_warps=4, num_stages=5)
    configs = [*km._WIDE_4_BYTE, other]
    assert km._prune(configs, {"A": torch.empty(2, 2)}) == configs
    for dtype in (torch.bfloat16, torch.float16):
        assert km._prune(configs, {"A": torch.empty(2, 2, dtype=dtype)}) == [other]


@pytest.mark.parametrize("k_dim", [0, 1])
@pytest.mark.parametrize("layout", ["k_major", "other_major", "strided"])
def test_k_major_copy_holds_the_operand(layout, k_dim):
    g = torch.Generator().manual_seed(0)
    shape = (45, 70) if k_dim == 0 else (70, 45)  # k = 45: rows padded to 48
    if layout == "strided":  # neither dim contiguous
        t = torch.randn(shape[0], 2 * shape[1], generator=g)[:, ::2]
    elif (layout == "k_major") == (k_dim == 1):
        t = torch.randn(*shape, generator=g)
    else:
        t = torch.randn(*reversed(shape), generator=g).t()
    got = km._k_major(t, k_dim)
    assert got.stride(k_dim) == 1 and got.stride(1 - k_dim) == 48
    assert torch.equal(got, t)


class TmaLaunches:
    """Stands in for the TMA kernel: records each launch's descriptors and layout flags, then launches the real one."""

    def __init__(self, kernel):
        self.kernel, self.seen = kernel, []

    def __getitem__(self, grid):
        def launch(a_desc, b_desc, c_desc, *rest, **meta):
            self.seen.append({"shapes": [d.shape for d in (a_desc, b_desc, c_desc)], "A_T": meta["A_T"],
                              "B_T": meta["B_T"]})
            return self.kernel[grid](a_desc, b_desc, c_desc, *rest, **meta)
        return launch


@pytest.fixture
def tma_launches(monkeypatch):
    rec = TmaLaunches(km._matmul_tma_kernel)
    monkeypatch.setattr(km, "TMA", True)
    monkeypatch.setattr(km, "_matmul_tma_kernel", rec)
    monkeypatch.setattr(km, "sm_count", lambda device: 3)  # fewer programs than tiles: each walks several
    return rec


@pytest.mark.parametrize("dtype,precision", [(torch.bfloat16, "ieee"), (torch.float32, "tf32")])
@pytest.mark.parametrize("layout", ["kn", "nk", "mn"])
def test_hopper_products_go_through_descriptors_of_the_storage(monkeypatch, launches, tma_launches, layout, dtype,
                                                               precision):
    monkeypatch.setattr(km, "_wgmma", lambda device: True)
    a, b = (t.to(dtype) for t in operands(layout, k=80, m=96, n=64))  # rows 16-byte aligned
    c = km.matmul_fwd(a, b, precision)
    assert launches.seen == []
    [seen] = tma_launches.seen
    if dtype == torch.float32:  # copied K-major first: A as stored, B stored transposed
        assert (seen["A_T"], seen["B_T"]) == (False, True)
    else:  # 16-bit operands as they are: A^T and B are stored transposed in "mn" and "kn"
        assert (seen["A_T"], seen["B_T"]) == (layout == "mn", layout == "kn")
    a_rows = [80, 96] if seen["A_T"] else [96, 80]
    b_rows = [64, 80] if seen["B_T"] else [80, 64]
    assert seen["shapes"] == [a_rows, b_rows, [96, 64]]
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=0, atol=1e-2 * ref.abs().max())


def test_operands_a_descriptor_cannot_take_go_through_pointers(monkeypatch, launches, tma_launches):
    monkeypatch.setattr(km, "_wgmma", lambda device: True)
    a, b = (t.bfloat16() for t in operands("nk", k=45))  # rows 90 bytes apart
    km.matmul_fwd(a, b)
    assert tma_launches.seen == [] and launches.seen == [as_given(a, b)]
    a, b = (t.bfloat16() for t in operands("nk", k=48, n=30))  # A and B aligned, C's rows 60 bytes apart
    km.matmul_fwd(a, b)
    assert tma_launches.seen == [] and len(launches.seen) == 2


def test_pointers_when_descriptors_are_switched_off(monkeypatch, pointers):  # BENCH_MATMUL_TMA=0
    monkeypatch.setattr(km, "_wgmma", lambda device: True)
    monkeypatch.setattr(km, "_matmul_tma_kernel", None)  # called, it would raise
    a, b = (t.bfloat16() for t in operands("nk", k=80, m=96, n=64))  # a descriptor could take each
    km.matmul_fwd(a, b)
    assert pointers.seen == [as_given(a, b)]


@pytest.mark.slow
@pytest.mark.parametrize("value,on", [(None, True), ("0", False), ("1", True)])
def test_descriptor_switch_reads_the_environment(value, on):
    env = {k: v for k, v in os.environ.items() if k != "BENCH_MATMUL_TMA"}
    if value is not None:
        env["BENCH_MATMUL_TMA"] = value
    proc = subprocess.run([sys.executable, "-c", "import kernels.matmul as k; print(k.TMA)"], env=env,
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == str(on)
