"""A compact decoder-only transformer LM that whole-model components (data parallel, training step) share.

Pre-norm blocks with RMSNorm, rotary position embeddings, SwiGLU MLP, no biases (gpt-fast / Llama style). The
module name starts with '_' so the registry does not take it for a component.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class LMConfig:
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    vocab: int = 10_000
    context: int = 512
    rope_theta: float = 10_000.0
    tie_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def params(self) -> int:
        """Parameter count by hand: per layer 4 d^2 (q, k, v, o) + 3 d d_ff (SwiGLU) + 2 d (norms)."""
        d, v = self.d_model, self.vocab
        per_layer = 4 * d * d + 3 * d * self.d_ff + 2 * d
        return self.n_layers * per_layer + v * d + d + (0 if self.tie_embeddings else v * d)


# d_ff = 4 d as in the published size table these names come from. With SwiGLU's three matrices that makes the
# names nominal: "2.7B" has 3.41e9 parameters (untied), "xl" 2.0e9.
CONFIGS = {
    "tiny": LMConfig(d_model=64, n_layers=2, n_heads=4, d_ff=256, vocab=512, context=64),
    "tiny-tied": LMConfig(d_model=64, n_layers=2, n_heads=4, d_ff=256, vocab=512, context=64, tie_embeddings=True),
    "small": LMConfig(d_model=768, n_layers=12, n_heads=12, d_ff=3072),
    "medium": LMConfig(d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    "large": LMConfig(d_model=1280, n_layers=36, n_heads=20, d_ff=5120),
    "xl": LMConfig(d_model=1600, n_layers=48, n_heads=25, d_ff=6400),
    "2.7B": LMConfig(d_model=2560, n_layers=32, n_heads=32, d_ff=10240),
}


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(cfg: LMConfig, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    half = cfg.head_dim // 2
    freqs = cfg.rope_theta ** (-torch.arange(half, device=device, dtype=torch.float32) / half)  # [half]
    angles = torch.arange(cfg.context, device=device, dtype=torch.float32)[:, None] * freqs  # [context, half]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [batch, heads, seq, head_dim]: rotate pairs (first half, second half) by position-dependent angles."""
    s = x.shape[-2]
    x1, x2 = x.float().chunk(2, dim=-1)
    c, n = cos[:s], sin[:s]  # [seq, half]
    return torch.cat([x1 * c - x2 * n, x1 * n + x2 * c], dim=-1).to(x.dtype)


class Block(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.attn_norm = RMSNorm(d)
        self.wqkv = nn.Linear(d, 3 * d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.mlp_norm = RMSNorm(d)
        self.w_gate_up = nn.Linear(d, 2 * cfg.d_ff, bias=False)
        self.w_down = nn.Linear(cfg.d_ff, d, bias=False)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        h = self.cfg.n_heads
        q, k, v = self.wqkv(self.attn_norm(x)).split(d, dim=-1)  # [b, s, d] each
        q, k, v = (t.view(b, s, h, d // h).transpose(1, 2) for t in (q, k, v))  # [b, h, s, hd]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, h, s, hd]
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, d))
        gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)  # [b, s, d_ff] each
        return x + self.w_down(F.silu(gate) * up)


class TransformerLM(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    @torch.no_grad()
    def reset_parameters(self, seed: int | None = None) -> None:
        """Norm weights 1, matrices N(0, 1/fan_in), embeddings N(0, 0.02^2), drawn where the parameters live
        (a CPU generator gives the same numbers on every machine; a CUDA one is fast for billion-parameter
        models), and the RoPE tables recomputed (after `to_empty` they hold garbage)."""
        dev = self.embed.weight.device
        gen = torch.Generator(device=dev)
        if seed is not None:
            gen.manual_seed(seed)
        for name, p in self.named_parameters():
            if p.ndim == 1:
                nn.init.ones_(p)
            else:
                std = 0.02 if "embed" in name else 1 / math.sqrt(p.shape[1])
                p.copy_(torch.randn(p.shape, generator=gen, device=dev, dtype=torch.float32) * std)
        cos, sin = rope_tables(self.cfg, dev)
        self.rope_cos.copy_(cos)
        self.rope_sin.copy_(sin)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [batch, seq] -> logits [batch, seq, vocab]."""
        x = self.embed(tokens)  # [b, s, d]
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.head(self.norm(x))


def build(name_or_cfg: str | LMConfig, device=None, dtype=torch.float32, seed: int = 0,
          init_on_device: bool = False) -> TransformerLM:
    """The model with seeded weights. By default they are drawn on the CPU and moved, so every device starts
    from the same numbers as the float64 reference; `init_on_device` allocates on `device` directly and draws
    there (the xl config's 2e9 parameters take ~30 s to draw on a CPU, well under a second on a GPU)."""
    cfg = CONFIGS[name_or_cfg] if isinstance(name_or_cfg, str) else name_or_cfg
    if init_on_device and device is not None:
        with torch.device("meta"):
            model = TransformerLM(cfg)
        model = model.to_empty(device=device)
        if cfg.tie_embeddings:  # to_empty gives the tied head a storage of its own
            model.head.weight = model.embed.weight
    else:
        model = TransformerLM(cfg)
    model.reset_parameters(seed)
    return model.to(device=device, dtype=dtype)


def loss_fn(model: TransformerLM, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy on tokens [batch, seq + 1]."""
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
