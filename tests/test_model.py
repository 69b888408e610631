"""The shared transformer LM: parameter counts by hand, shapes, causality, RoPE, and that it learns."""
import pytest
import torch

from impls._model import CONFIGS, apply_rope, build, loss_fn, rope_tables


@pytest.mark.parametrize("name", ["tiny", "tiny-tied", "small"])
def test_parameter_count_by_hand(name):
    cfg = CONFIGS[name]
    model = build(cfg) if name != "small" else build(cfg, device="meta")
    assert sum(p.numel() for p in model.parameters()) == cfg.params()


def test_published_configs():
    assert (CONFIGS["xl"].d_model, CONFIGS["xl"].n_layers, CONFIGS["xl"].n_heads) == (1600, 48, 25)
    # per layer 4 d^2 + 3 d d_ff + 2 d; embeddings and head 2 V d; final norm d
    d, ff, v = 2560, 10240, 10_000
    assert CONFIGS["2.7B"].params() == 32 * (4 * d * d + 3 * d * ff + 2 * d) + 2 * v * d + d == 3_406_809_600
    assert all(c.vocab == 10_000 for n, c in CONFIGS.items() if not n.startswith("tiny"))


def test_logits_shape_and_causality():
    model = build("tiny", seed=1)
    tokens = torch.randint(0, 512, (2, 16))
    logits = model(tokens)
    assert logits.shape == (2, 16, 512)
    changed = tokens.clone()
    changed[:, 10] = (changed[:, 10] + 1) % 512
    after = model(changed)
    assert torch.allclose(logits[:, :10], after[:, :10], atol=1e-5)  # the past does not see the future
    assert not torch.allclose(logits[:, 10:], after[:, 10:])


def test_rope_preserves_norm_and_encodes_relative_position():
    cfg = CONFIGS["tiny"]
    cos, sin = rope_tables(cfg)
    q = torch.randn(1, 1, 8, cfg.head_dim)
    k = torch.randn(1, 1, 8, cfg.head_dim)
    rq, rk = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
    assert torch.allclose(rk.norm(dim=-1), k.norm(dim=-1), atol=1e-5)
    # Same vectors at every position: the score depends only on the distance between positions.
    qs, ks = apply_rope(q[:, :, :1].expand(1, 1, 8, -1), cos, sin), apply_rope(k[:, :, :1].expand(1, 1, 8, -1), cos, sin)
    s = qs[0, 0] @ ks[0, 0].T  # [8, 8]
    assert torch.allclose(s[3, 1], s[6, 4], atol=1e-5)


def test_it_learns_a_repeated_sequence():
    torch.manual_seed(0)
    model = build("tiny", seed=2)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, 512, (4, 33))
    first = loss_fn(model, tokens).item()
    for _ in range(30):
        opt.zero_grad()
        loss = loss_fn(model, tokens)
        loss.backward()
        opt.step()
    assert loss.item() < 0.5 * first


def test_init_on_device_draws_the_same_weights_and_rope_tables():
    """`init_on_device` (meta allocation, then drawing where the parameters live) must leave nothing unset: on
    the CPU it gives exactly the default build's numbers, buffers included."""
    default, direct = build("tiny-tied", seed=3), build("tiny-tied", device="cpu", seed=3, init_on_device=True)
    assert direct.head.weight is direct.embed.weight  # tying survives the meta allocation
    for (name, a), (_, b) in zip(default.state_dict().items(), direct.state_dict().items()):
        assert torch.equal(a, b), name
    cos, _ = rope_tables(CONFIGS["tiny-tied"])
    assert torch.equal(direct.rope_cos, cos)
    assert not torch.equal(build("tiny-tied", device="cpu", seed=4, init_on_device=True).head.weight,
                           direct.head.weight)  # the seed is used
