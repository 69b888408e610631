"""Session 58: one process, one GPU, the small LM's training step (bf16 autocast, AdamW), its backward on autograd's
worker thread (the default) or on the calling thread, interleaved rounds. Host time a step, device time by events,
and the backward alone."""
import statistics
import sys
import time

import torch

from impls import _model

cfg = sys.argv[1] if len(sys.argv) > 1 else "small"
model = _model.build(cfg, device="cuda", dtype=torch.float32, seed=0)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(_model.CONFIGS[cfg].vocab, (4, 513), device="cuda")


def step(calling: bool):
    t0 = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = _model.loss_fn(model, tokens)
    t1 = time.perf_counter()
    if calling:
        with torch.autograd.set_multithreading_enabled(False):
            loss.backward()
    else:
        loss.backward()
    t2 = time.perf_counter()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


for calling in (False, True):
    for _ in range(5):
        step(calling)
torch.cuda.synchronize()
res = {False: [], True: []}
for rnd in range(4):
    for calling in ((False, True) if rnd % 2 == 0 else (True, False)):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host = []
        torch.cuda.synchronize()
        s.record()
        w0 = time.perf_counter()
        for _ in range(20):
            host.append(step(calling))
        e.record()
        e.synchronize()
        wall = (time.perf_counter() - w0) / 20 * 1e3
        dev = s.elapsed_time(e) / 20
        fw, bw, op = (statistics.median(h[i] for h in host) * 1e3 for i in range(3))
        res[calling].append(dev)
        print(f"{cfg} round {rnd} {'calling' if calling else 'worker '}: {dev:7.2f} ms a step by events, wall {wall:7.2f}; "
              f"host forward {fw:6.2f} backward {bw:6.2f} optimizer {op:6.2f} ms", flush=True)
for calling in (False, True):
    print(f"{cfg} {'calling' if calling else 'worker '} median of rounds {statistics.median(res[calling]):.2f} ms")
