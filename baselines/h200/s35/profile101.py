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

t = E.inputs(1024, 16384)
(_, _, (rstd,), rms_lib), (_, _, ln_stats, ln_lib) = E.norms(t)
calls = [rms_lib,
         lambda: E.ring_bwd(t["dy"], t["x"], t["w"], (rstd,), False, 1, 8, 2, 132, 1),
         ln_lib,
         lambda: E.ring_bwd(t["dy"], t["x"], t["w"], ln_stats, True, 1, 8, 3, 132, 0)]
for fn in calls:
    fn()
    fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for fn in calls:
    fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
