"""data_parallel: one training step (forward, backward, gradient sync, AdamW) of the shared LM across ranks.

Every strategy is a small `apply_*` transform of the one model from impls/_model.py and returns a `Step`: call it
with this rank's tokens to train one step. The final RMSNorm weight is frozen in every strategy (a parameter
without gradient is the case sync code most often gets wrong), and the `tiny-tied` config ties the embedding and
the output head. Gradients are averaged over ranks, so N ranks of `batch` sequences train exactly as one process
on the N x batch global batch: the float64 reference is that single process (for configs small enough to run it).

dtype fp32 trains in fp32; dtype bf16 is mixed precision: fp32 parameters, gradients reduced in fp32, matmuls in
bf16 (autocast, or FSDP's param_dtype=bf16).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from bench.profiling import backward_in_ranges, named
from bench.registry import Cost, component
from impls import _model

LR, BETAS, WEIGHT_DECAY = 1e-3, (0.9, 0.95), 0.1
REFERENCE_MAX_PARAMS = 20_000_000  # above this the float64 single-process reference is not run (the row says so)
FROZEN = "norm.weight"


def make_inputs(point, dtype, device, seed, rank):
    """This rank's tokens [batch, seq + 1] (drawn on the CPU so the reference can redraw every rank's)."""
    cfg = _model.CONFIGS[point["config"]]
    gen = torch.Generator().manual_seed(seed * 7919 + rank)
    tokens = torch.randint(cfg.vocab, (point["batch"], point["seq"] + 1), generator=gen)
    return {"tokens": tokens.to(device)}


def build_model(point, device, dtype=torch.float32) -> _model.TransformerLM:
    # models too big for the float64 reference (which draws its weights on the CPU) draw theirs on the device
    model = _model.build(point["config"], device=device, dtype=dtype, seed=0,
                         init_on_device=params_of(point) > REFERENCE_MAX_PARAMS)
    model.get_parameter(FROZEN).requires_grad_(False)
    return model


def adamw(params) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=LR, betas=BETAS, weight_decay=WEIGHT_DECAY)


def flat_params(model) -> torch.Tensor:
    """Every parameter (frozen too, tied ones once) flattened in named_parameters order, fp32."""
    return torch.cat([p.detach().float().reshape(-1) for _, p in model.named_parameters()])


def reference(point, dtype, seed, rank, world, n):
    """The parameters after one step of single-process fp64 training on every rank's batch, first n."""
    model = build_model(point, "cpu", torch.float64)
    tokens = torch.cat([make_inputs(point, dtype, "cpu", seed, r)["tokens"] for r in range(world)])
    opt = adamw([p for p in model.parameters() if p.requires_grad])
    _model.loss_fn(model, tokens).backward()
    opt.step()
    return (flat_params(model).double()[:n],)


def params_of(point) -> int:
    return _model.CONFIGS[point["config"]].params()


def cost(point, dtype, mode):
    """6 N FLOPs a token for the weights plus causal attention (6 L s^2 d a sequence over fwd + bwd); bytes are
    the weights read in forward and backward and the optimizer's read/write of params, grads and two moments;
    comm_bytes: one all-reduce of fp32 gradients (nccl-tests' bus bytes)."""
    cfg = _model.CONFIGS[point["config"]]
    p, ws = cfg.params(), point["world_size"]
    tokens = point["batch"] * point["seq"]
    flops = 6 * p * tokens + 6 * cfg.n_layers * point["batch"] * point["seq"] ** 2 * cfg.d_model
    weight = 2 if dtype == "bf16" else 4
    nbytes = 3 * p * weight + 4 * p * 4 * 2
    return Cost(flops, nbytes, "tensor", comm_bytes=4 * p * 2 * (ws - 1) / ws)


data_parallel = component(
    "data_parallel",
    description="one LM training step across ranks: DDP variants, ZeRO-1, FSDP",
    axes={"config": tuple(_model.CONFIGS), "batch": int, "seq": int, "world_size": int, "bucket_mb": int},
    make_inputs=make_inputs,
    cost=cost,
    reference=reference,
    tolerance={"fp32": 1e-5, "bf16": 2e-2},
    modes=("step",),
    dtypes=("fp32", "bf16"),
    baseline="ddp",
    ranked=True,
    comm_share=True,
)


# ---------------------------------------------------------------------------------------------- the step itself

@dataclass
class Step:
    """One training step of `model` (possibly wrapped) with `opt`; `sync` runs between backward and the optimizer
    step (explicit gradient averaging), `after` after it (ZeRO-1's parameter broadcast)."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    autocast: bool = False
    sync: Callable[[], None] | None = None
    after: Callable[[], None] | None = None
    full_params: Callable[[], torch.Tensor] | None = None  # flat fp32 parameters of the whole model (gathered)
    row_info: dict = field(default_factory=dict)
    ranks_agree_only: bool = False  # set for models too big for the float64 reference: bench/distributed.py

    def __call__(self, tokens):
        cast = (torch.autocast(tokens.device.type, dtype=torch.bfloat16) if self.autocast
                else contextlib.nullcontext())
        with named("forward"), cast:
            loss = _model.loss_fn(self.model, tokens)
        with named("backward"), backward_in_ranges([loss]):
            loss.backward()
        if self.sync is not None:
            with named("grad_sync"):
                self.sync()
        with named("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        if self.after is not None:
            with named("param_sync"):
                self.after()
        return loss.detach()

    def check_outputs(self):
        return (self.full_params() if self.full_params else flat_params(self.model),)


def trainable(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _copy_back(grads: list[torch.Tensor], flat: torch.Tensor) -> None:
    for g, synced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
        g.copy_(synced)


def _average(grads: list[torch.Tensor]) -> None:
    flat = torch._utils._flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    _copy_back(grads, flat)


def _ddp(model):
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = next(model.parameters()).device
    return DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)


def apply_ddp(model, mixed: bool) -> Step:
    return Step(_ddp(model), adamw(trainable(model)), autocast=mixed, full_params=lambda: flat_params(model))


def apply_naive(model, mixed: bool) -> Step:
    """All-reduce every gradient, one by one, after backward."""
    ws = dist.get_world_size()

    def sync():
        for p in trainable(model):
            dist.all_reduce(p.grad)
            p.grad /= ws

    return Step(model, adamw(trainable(model)), autocast=mixed, sync=sync)


def apply_flat(model, mixed: bool) -> Step:
    """One all-reduce of all gradients flattened into one buffer."""
    return Step(model, adamw(trainable(model)), autocast=mixed, sync=lambda: _average([p.grad for p in trainable(model)]))


def apply_overlap(model, mixed: bool) -> Step:
    """An asynchronous all-reduce per parameter as soon as its gradient is accumulated (overlaps backward)."""
    ws = dist.get_world_size()
    pending: list = []

    def hook(p):
        pending.append((p, dist.all_reduce(p.grad, async_op=True)))

    for p in trainable(model):
        p.register_post_accumulate_grad_hook(hook)

    def sync():
        for p, work in pending:
            work.wait()
            p.grad /= ws
        pending.clear()

    return Step(model, adamw(trainable(model)), autocast=mixed, sync=sync)


def apply_bucketed(model, mixed: bool, bucket_mb: int) -> Step:
    """Parameters in buckets of about bucket_mb MiB (reverse registration order, roughly the order backward
    produces gradients); a bucket's flattened gradients are all-reduced asynchronously once all are ready."""
    ws = dist.get_world_size()
    limit = bucket_mb * 2**20
    buckets: list[list[torch.nn.Parameter]] = [[]]
    size = 0
    for p in reversed(trainable(model)):
        if buckets[-1] and size + p.numel() * 4 > limit:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += p.numel() * 4
    bucket_of = {id(p): i for i, b in enumerate(buckets) for p in b}
    ready = [0] * len(buckets)
    pending: list = []

    def hook(p):
        i = bucket_of[id(p)]
        ready[i] += 1
        if ready[i] == len(buckets[i]):
            grads = [q.grad for q in buckets[i]]
            flat = torch._utils._flatten_dense_tensors(grads)
            pending.append((grads, flat, dist.all_reduce(flat, async_op=True)))

    for p in trainable(model):
        p.register_post_accumulate_grad_hook(hook)

    def sync():
        for grads, flat, work in pending:
            work.wait()
            flat /= ws
            _copy_back(grads, flat)
        pending.clear()
        ready[:] = [0] * len(buckets)

    return Step(model, adamw(trainable(model)), autocast=mixed, sync=sync,
                row_info={"buckets": len(buckets)})


def apply_zero1(model, mixed: bool) -> Step:
    """Our ZeRO-1: gradients all-reduced, each rank keeps AdamW state for (and updates) only the parameters it
    owns (a greedy split by size), then every owner broadcasts its updated parameters, flattened."""
    rank, ws = dist.get_rank(), dist.get_world_size()
    params = trainable(model)
    owned: list[list[torch.nn.Parameter]] = [[] for _ in range(ws)]
    load = [0] * ws
    for p in sorted(params, key=lambda q: -q.numel()):
        r = load.index(min(load))
        owned[r].append(p)
        load[r] += p.numel()

    def broadcast():
        for r in range(ws):
            if not owned[r]:
                continue
            flat = torch._utils._flatten_dense_tensors([p.data for p in owned[r]])
            dist.broadcast(flat, src=r)
            if r != rank:
                _copy_back([p.data for p in owned[r]], flat)

    def sync():
        _average([p.grad for p in params])
        for r in range(ws):  # the optimizer never sees the others' gradients
            if r != rank:
                for p in owned[r]:
                    p.grad = None

    return Step(model, adamw(owned[rank] or [torch.nn.Parameter(torch.zeros(1))]), autocast=mixed, sync=sync,
                after=broadcast)


def apply_zero_torch(model, mixed: bool) -> Step:
    """torch's ZeroRedundancyOptimizer (AdamW state sharded) over DDP."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    opt = ZeroRedundancyOptimizer(trainable(model), optimizer_class=torch.optim.AdamW, lr=LR, betas=BETAS,
                                  weight_decay=WEIGHT_DECAY)
    return Step(_ddp(model), opt, autocast=mixed, full_params=lambda: flat_params(model))


def apply_fsdp1(model, mixed: bool) -> Step:
    """FullyShardedDataParallel, one unit per transformer block (the tied embedding and head in the root)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    dev = next(model.parameters()).device
    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
    fsdp = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({_model.Block}), mixed_precision=mp, use_orig_params=True,
                device_id=dev if dev.type == "cuda" else None)

    def full():
        with FSDP.summon_full_params(fsdp, writeback=False):
            return flat_params(fsdp.module).clone()

    return Step(fsdp, adamw(trainable(fsdp)), full_params=full)


def apply_fsdp2(model, mixed: bool) -> Step:
    """fully_shard (FSDP2, DTensor parameters) on every block, then the root."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed
          else MixedPrecisionPolicy())
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)

    def full():
        return torch.cat([(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().reshape(-1)
                          for _, p in model.named_parameters()])

    return Step(model, adamw(trainable(model)), full_params=full)


STRATEGIES = {
    "ddp": (apply_ddp, "torch DistributedDataParallel (bucketed all-reduce overlapped with backward)"),
    "naive": (apply_naive, "all-reduce every gradient after backward, one call per parameter"),
    "flat": (apply_flat, "one all-reduce of the flattened gradients after backward"),
    "overlap": (apply_overlap, "async all-reduce per parameter from post-accumulate-grad hooks"),
    "bucketed": (apply_bucketed, "async all-reduce per bucket of bucket_mb MiB from post-accumulate-grad hooks"),
    "zero1": (apply_zero1, "our ZeRO-1: optimizer state sharded by parameter, owners broadcast updates"),
    "zero_torch": (apply_zero_torch, "torch ZeroRedundancyOptimizer over DDP"),
    "fsdp1": (apply_fsdp1, "FullyShardedDataParallel per block (FSDP1)"),
    "fsdp2": (apply_fsdp2, "fully_shard per block (FSDP2)"),
}


def _register(name: str, apply, description: str) -> None:
    def factory(point, dtype, device):
        model = build_model(point, device)
        mixed = dtype == "bf16"
        step = apply(model, mixed, point["bucket_mb"]) if name == "bucketed" else apply(model, mixed)
        world = dist.get_world_size() if dist.is_initialized() else point["world_size"]
        mem = predict_memory(point, dtype, name, world)
        step.row_info = {**step.row_info, "predicted_mem_bytes": int(peak_memory(mem)),
                         "predicted_mem": {k: int(v) for k, v in mem.items()}}
        if params_of(point) > REFERENCE_MAX_PARAMS:
            step.ranks_agree_only = True
            step.row_info["check_note"] = (f"float64 reference not run ({params_of(point) / 1e6:.0f}M parameters): "
                                           "ranks checked to agree")
        return step

    # FSDP1 refuses to run without an accelerator
    data_parallel.impl(name, description=description, factory=True, world_size=2, cuda=name == "fsdp1")(factory)


for _name, (_apply, _description) in STRATEGIES.items():
    _register(_name, _apply, _description)


# ------------------------------------------------------------------------------------------ the memory model

SHARDED_OPTIMIZER = {"zero1", "zero_torch", "fsdp1", "fsdp2"}
SHARDED_PARAMS = {"fsdp1", "fsdp2"}


def activation_bytes(point, dtype) -> float:
    """Tensors autograd saves for backward, per rank, by hand from impls/_model.py (s = bytes of the compute dtype):
    per token and layer: the two RMSNorm inputs (fp32 residual stream, 4d each) and outputs (s d each), qkv (3 s d),
    q and k after RoPE's fp32 round trip (2 x 4 d, plus 2 s d), the attention output and its logsumexp (s d), the
    wo output added to the residual, the MLP input, gate/up (2 s f), silu(gate) and the product (2 s f) plus its
    fp32 silu input (4 f); then the logits (s V) and their fp32 copy for cross-entropy (4 V x 2)."""
    cfg = _model.CONFIGS[point["config"]]
    s = 2 if dtype == "bf16" else 4
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab
    per_layer = 2 * 4 * d + 2 * s * d + 3 * s * d + 2 * 4 * d + 2 * s * d + s * d + s * d + 2 * s * f + 2 * s * f
    tokens = point["batch"] * point["seq"]
    return tokens * (cfg.n_layers * per_layer + s * v + 2 * 4 * v)


def predict_memory(point, dtype, strategy: str, world: int) -> dict[str, float]:
    """Bytes per rank by what holds them: parameters, gradients, AdamW's two moments (fp32), sharded by the
    strategy; DDP's persistent gradient buckets; the flat gradient copies our flat/bucketed sync keeps until it
    ends; foreach AdamW's temporary sqrt(v) (one fp32 tensor per parameter the rank steps); activations;
    autocast's bf16 weight copies; FSDP's unsharded root and two blocks (current and prefetched) with their
    gradients. `peak_memory` combines them by phase of the step."""
    cfg = _model.CONFIGS[point["config"]]
    p = cfg.params()
    block = 4 * cfg.d_model**2 + 3 * cfg.d_model * cfg.d_ff + 2 * cfg.d_model
    params_share = 1 / world if strategy in SHARDED_PARAMS else 1
    optimizer_share = 1 / world if strategy in SHARDED_OPTIMIZER else 1
    mem = {
        "params": 4 * p * params_share,
        "grads": 4 * p * params_share,
        "optimizer": 8 * p * optimizer_share,
        "optimizer_temp": 4 * p * optimizer_share,
        "activations": activation_bytes(point, dtype),
    }
    if strategy in ("ddp", "zero_torch"):
        mem["buckets"] = 4 * p
    elif strategy in ("flat", "bucketed", "zero1"):
        mem["flat_copies"] = 4 * p
    elif strategy in SHARDED_PARAMS:
        unsharded = (p - cfg.n_layers * block) + 2 * block
        mem["unsharded"] = unsharded * (2 if dtype == "bf16" else 4) + unsharded * 4
    if dtype == "bf16" and strategy not in SHARDED_PARAMS:
        mem["bf16_weights"] = 2 * p
    return mem


def peak_memory(mem: dict[str, float]) -> float:
    """The step's peak: parameters, optimizer state and DDP's buckets are always there; on top of them the largest
    of the forward/backward phase (activations, bf16 weights, unsharded blocks), the gradient sync (gradients and
    flat copies) and the optimizer step (gradients and AdamW's temporaries)."""
    part = lambda *names: sum(mem.get(n, 0.0) for n in names)
    always = part("params", "optimizer", "buckets")
    return always + max(part("activations", "bf16_weights", "unsharded"), part("grads", "flat_copies"),
                        part("grads", "optimizer_temp"))
