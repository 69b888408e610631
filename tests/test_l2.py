"""The L2 reset before cold samples (kernels/l2.py): what runs on the CPU through the interpreter, and the two
kernels compiled for sm_90 as a GPU would run them (the interpreter ignores cache hints and cannot run PTX)."""
import json
import os
import subprocess
import sys

import pytest
import torch

from kernels import l2


def test_claim_loads_every_element_including_a_partial_block():
    buf = torch.ones(3 * 4096 + 32, dtype=torch.int32)
    l2._claim_kernel[(4,)](buf, buf.numel(), BLOCK=4096)
    assert buf[::4096].tolist() == [4096, 4096, 4096, 32]  # each program's sum: every element was loaded


def test_reset_without_priorities_zeroes_the_buffer():
    buf = torch.arange(1, 64 * 32 + 1, dtype=torch.int32)
    l2.reset_l2(buf, priorities=False)
    assert int(buf.abs().max()) == 0


@pytest.mark.parametrize("buf", [torch.zeros(64, dtype=torch.float32), torch.zeros(40, dtype=torch.int32),
                                 torch.zeros(64, 2, dtype=torch.int32).t()])
def test_reset_rejects_buffers_it_cannot_walk_by_lines(buf):
    with pytest.raises(ValueError, match="int32"):
        l2.reset_l2(buf)


def test_cpu_has_no_priorities_to_reset():
    assert not l2.priorities_supported(torch.device("cpu"))


COMPILE = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels import l2
out = {}
for name, fn, sig, consts in [
        ("claim", l2._claim_kernel, {"BUF": "*i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 4096}),
        ("demote", l2._demote_kernel, {"BUF": "*i32", "n_lines": "i32", "LINES": "constexpr",
                                       "INTS_PER_LINE": "constexpr"}, {"LINES": 1024, "INTS_PER_LINE": 32})]:
    k = triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32))
    out[name] = {"ptx": k.asm["ptx"], "cubin": len(k.asm.get("cubin", b""))}
print(json.dumps(out))
"""


def test_kernels_compile_for_sm90_with_their_cache_hints():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled, not interpreted
    done = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    claim, demote = out["claim"]["ptx"], out["demote"]["ptx"]
    assert "createpolicy.fractional.L2::evict_last" in claim and "L2::cache_hint" in claim
    # 1024 lines a program over 4 warps: 8 lines a thread, each its own applypriority; ptxas accepted both
    assert demote.count("applypriority.global.L2::evict_normal") == 8
    assert out["claim"]["cubin"] > 0 and out["demote"]["cubin"] > 0
