"""A model's initial weights: drawn once, after every module exists, as model.transformer.init_weights says, in the
encoder as in the decoder; and none drawn at all when the caller fills them (build_model(init=False))."""

from __future__ import annotations

import math
import threading

import pytest
import torch
from torch import nn

from model.config import ModelConfig
from model.factory import NoRandomDraws, build_model
from model.transformer import PositionalEncoding

SIZES = {"vocab_size": 60, "d_model": 48, "n_heads": 4, "d_ff": 96, "max_len": 40, "dropout": 0.0}
CONFIGS = {
    "encoder-decoder": {"kind": "encoder-decoder", "n_encoder_layers": 2, "n_decoder_layers": 2},
    "decoder-only": {"kind": "decoder-only", "n_encoder_layers": 0, "n_decoder_layers": 2},
}
VARIANTS = {
    "post-sinusoidal-tied": {},
    "pre-learned-untied": {"norm": "pre", "positional": "learned", "tie_embeddings": False},
}


@pytest.fixture(params=[(kind, variant) for kind in CONFIGS for variant in VARIANTS], ids="-".join)
def fresh(request) -> nn.Module:
    kind, variant = request.param
    torch.manual_seed(0)
    return build_model(ModelConfig(**SIZES, **CONFIGS[kind], **VARIANTS[variant]))


def test_every_linear_starts_xavier_uniform_with_zero_bias_in_encoder_and_decoder(fresh) -> None:
    """W ~ U(-a, a), a = √(6 / (fan_in + fan_out)) (Glorot & Bengio 2010), b = 0: every draw within the bound,
    reaching near it, spread as a uniform is (std a/√3), in every stack the model has."""
    linears = {name: module for name, module in fresh.named_modules() if isinstance(module, nn.Linear)}
    stacks = ["encoder", "decoder"] if fresh.config.has_cross_attention else ["decoder"]
    for stack in stacks:
        assert sum(name.startswith(f"{stack}.") for name in linears) >= 12, f"the {stack}'s projections"
    for name, linear in linears.items():
        fan_out, fan_in = linear.weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))
        weight = linear.weight.detach()
        assert weight.abs().max() <= bound, f"{name}: a weight outside the Xavier bound {bound:.3f}"
        assert weight.abs().max() > bound / 2, f"{name}: every weight below half the bound: not drawn"
        assert float(weight.std()) == pytest.approx(bound / math.sqrt(3), rel=0.2), f"{name}: not spread as U(-a, a)"
        assert linear.bias is not None and torch.all(linear.bias == 0), f"{name}: a non-zero bias"


def test_embeddings_and_a_learned_positions_table_start_small_and_random(fresh) -> None:
    config = fresh.config
    table = fresh.embed.lut.weight.detach()
    if not config.tie_embeddings:  # a tied table is the generator's matrix: Xavier, checked above
        assert float(table.std()) == pytest.approx(config.d_model**-0.5, rel=0.1)
    positions = fresh.positions
    assert isinstance(positions, PositionalEncoding)
    if isinstance(positions.table, nn.Parameter):
        assert float(positions.table.detach().std()) == pytest.approx(0.02, rel=0.1)


def test_the_same_seed_gives_the_same_model() -> None:
    config = ModelConfig(**SIZES, **CONFIGS["encoder-decoder"])
    torch.manual_seed(3)
    first = build_model(config).state_dict()
    torch.manual_seed(3)
    second = build_model(config).state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_a_model_built_to_be_filled_draws_no_random_number() -> None:
    before = torch.get_rng_state()
    model = build_model(ModelConfig(**SIZES, **CONFIGS["encoder-decoder"], positional="learned"), init=False)
    assert torch.equal(torch.get_rng_state(), before)
    assert model.positions.table.shape == (40, 48)  # the shapes exist; the caller fills the numbers
    weights = torch.empty(3, 4)
    nn.init.xavier_uniform_(weights)  # torch.nn.init itself is untouched
    assert weights.abs().max() > 0


def test_skipping_the_draws_holds_only_for_the_thread_that_builds() -> None:
    drawn: list[torch.Tensor] = []

    def elsewhere() -> None:
        weights = torch.zeros(8, 8)
        nn.init.uniform_(weights, 1.0, 2.0)
        drawn.append(weights)

    with NoRandomDraws():
        skipped = nn.init.uniform_(torch.zeros(8, 8), 1.0, 2.0)
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert torch.all(skipped == 0) and torch.all(drawn[0] >= 1.0)
