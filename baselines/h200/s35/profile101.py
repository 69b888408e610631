"""Session 35: one call each of explore101's fastest ring variants and of the library's backward at 1024 x 16384
(bf16), for ncu: why the ring is slower. Compiles and warms every call first, then marks the profiled calls
with cudaProfilerStart/Stop (ncu --profile-from-start off).

Run from the repository root: ncu --profile-from-start off ... python3 baselines/h200/s35/profile101.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explore101 as E  # noqa: E402

dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)
rows, dim = 1024, 16384
x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
_, rstd = E.RN.rmsnorm_fwd(x, w)
_, mean, lrstd = E.LN.layernorm_fwd(x, w, b)
calls = [lambda: E.RN.rmsnorm_bwd(dy, x, w, rstd),
         lambda: E.ring_bwd(dy, x, w, (rstd,), False, 1, 8, 2, 132, 1),
         lambda: E.LN.layernorm_bwd(dy, x, w, mean, lrstd),
         lambda: E.ring_bwd(dy, x, w, (mean, lrstd), True, 1, 8, 3, 132, 0)]
for fn in calls:
    fn()
    fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for fn in calls:
    fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
