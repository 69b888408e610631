"""torch.compile as the `compile` implementations use it."""
from __future__ import annotations

import torch


def compile_fresh(fn):
    """torch.compile(fn) for one point. Dynamo is reset first, so no recompile limit is reached across points and
    the compile time lands in this point's row. Donated buffers are off: with them the compiled backward frees
    saved tensors and cannot be replayed, which the `bwd` mode does (autograd.grad with retain_graph)."""
    torch._dynamo.reset()
    torch._functorch.config.donated_buffer = False
    return torch.compile(fn, dynamic=False)
