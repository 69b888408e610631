"""Session 25: layernorm's split backward (16K-wide rows) with the other half's sums reduced as soon as they are
made (`early`: two more block reductions a row, but the other half's two accumulator arrays no longer live
while the own half is worked), against the library; and, for each, the register and spill counts of the kernels
Triton compiled on this machine (its own ptxas: Triton 3.6 here, where the offline counts, sm_90 with Triton
3.9's ptxas, read 255 registers and 1,252 B of spill stores for the split at 8 warps).

Run from the repository root: python3 baselines/h200/s25/explore54.py OUT.jsonl   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h200/s25/explore54.py --smoke   (CPU: checks only)

Checked against float64 at odd shapes (masked lanes in the halves) and against the library at the timed shapes,
then timed by bench.timing (L2 zeroed before each call), three rounds alternating. The rmsnorm backward is run
at the same shapes too, for its compiled kernels' counts.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time

import torch

T0 = time.time()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

EARLY = [
    ("        a1 = tl.zeros([HALF], dtype=tl.float32)\n        a2 = tl.zeros([HALF], dtype=tl.float32)\n"
     "        a1 += go\n        a2 += go * xo\n",
     "        s1 = tl.sum(go, axis=0)\n        s2 = tl.sum(go * xo, axis=0)\n"),
    ("        c1 = tl.sum(a1 + g, axis=0)\n        c2 = tl.sum(a2 + g * xhat, axis=0)\n",
     "        c1 = s1 + tl.sum(g, axis=0)\n        c2 = s2 + tl.sum(g * xhat, axis=0)\n"),
]
SHAPES = [(4096, 16384), (1024, 16384), (16384, 16384)]


def emit(out, **row):
    row["t"] = round(time.time() - T0, 1)
    print(json.dumps(row), flush=True)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def variant(tmp, rewrites):
    src = open(os.path.join(ROOT, "kernels", "layernorm.py")).read()
    for old, new in rewrites:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = os.path.join(tmp, "e54_layernorm_early.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("e54_layernorm_early", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def inputs(rows, dim, dev):
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(rows, dim, device=dev, generator=g) + 0.5).bfloat16()
    dy = torch.randn(rows, dim, device=dev, generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    b = (0.1 * torch.randn(dim, device=dev, generator=g)).bfloat16()
    return x, dy, w, b


def compiled(out, label, autotuner):
    """Every kernel `autotuner`'s function has compiled: warps, shared memory, registers, spills."""
    fn = autotuner.fn
    for device, caches in getattr(fn, "device_caches", {}).items():
        for k in list(caches[0].values()):
            try:
                k._init_handles()
            except Exception:  # noqa: BLE001 - a diagnostic: report what can be read
                pass
            md = k.metadata
            emit(out, kind="compiled", kernel=label, warps=getattr(md, "num_warps", None),
                 shared=getattr(md, "shared", None), regs=getattr(k, "n_regs", None),
                 spills=getattr(k, "n_spills", None))
    emit(out, kind="best", kernel=label, configs={str(key): str(cfg) for key, cfg in autotuner.cache.items()})


def main(path, smoke):
    out = open(path, "w") if path else None
    dev = "cpu" if smoke else "cuda"
    from kernels import layernorm as lib
    from kernels import rmsnorm as rms
    mods = {"lib": lib, "early": variant(tempfile.mkdtemp(prefix="e54_"), EARLY)}
    bad = 0
    for rows, dim in [(5, 16000)] if smoke else [(37, 16000), (64, 16383)]:
        x, dy, w, b = inputs(rows, dim, dev)
        xr, dyr, wr, br = (t.double().requires_grad_() for t in (x, dy, w, b))
        ref = torch.autograd.grad(torch.nn.functional.layer_norm(xr, (dim,), wr, br, 1e-5), (xr, wr, br), dyr)
        for name, m in mods.items():
            _, mean, rstd = m.layernorm_fwd(x, w, b)
            got = m.layernorm_bwd(dy, x, w, mean, rstd)
            errs = [float((a.double() - r).abs().max() / r.abs().max()) for a, r in zip(got, ref)]
            bad += max(errs) > 2e-2
            emit(out, kind="check", shape=[rows, dim], variant=name, errs=[round(e, 6) for e in errs],
                 ok=max(errs) <= 2e-2)
    if smoke:
        compiled(out, "layernorm bwd lib", lib._layernorm_bwd_kernel)  # the interpreter compiles nothing: configs
        if bad:
            raise SystemExit(f"{bad} checks off")
        return
    import bench.timing as BT
    cfg = BT.TimingConfig()
    for rows, dim in SHAPES:
        x, dy, w, b = inputs(rows, dim, dev)
        calls = {}
        for name, m in mods.items():
            _, mean, rstd = m.layernorm_fwd(x, w, b)
            calls[name] = (lambda m=m, mean=mean, rstd=rstd: m.layernorm_bwd(dy, x, w, mean, rstd))
        _, rstd = rms.rmsnorm_fwd(x, w)
        rms.rmsnorm_bwd(dy, x, w, rstd)
        ref, got = calls["lib"](), calls["early"]()
        diff = max(float((a.double() - r.double()).abs().max() / r.double().abs().max()) for a, r in zip(got, ref))
        emit(out, kind="vs-lib", shape=[rows, dim], max_rel_diff=diff)
        for rnd in range(3):
            for name, fn in calls.items():
                us = BT.time_cuda(fn, cfg).summary()["median_ms"] * 1e3
                emit(out, kind="time", shape=[rows, dim], variant=name, round=rnd, us=round(us, 2))
    for name, m in mods.items():
        compiled(out, f"layernorm bwd {name}", m._layernorm_bwd_kernel)
    compiled(out, "rmsnorm bwd lib", rms._rmsnorm_bwd_kernel)
    if bad:
        raise SystemExit(f"{bad} checks off")


if __name__ == "__main__":
    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    main(args[0] if args and not smoke else None, smoke)
