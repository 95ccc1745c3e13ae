"""The switches that make our Transformer a BERT or a Llama, checked without `transformers`: their config
validation (the Published group, and the flat form of older config.json files), parameter count, fused attention
path, trace names and the encoder-only model's trace."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from model.components.rotary import rotary_table, rotate
from model.config import PAPER, ConfigError, ModelConfig, Published
from model.factory import build_model
from model.transformer import EncoderOnly

BERT_LIKE = {
    "kind": "encoder-only",
    "vocab_size": 50,
    "d_model": 32,
    "n_heads": 4,
    "n_encoder_layers": 2,
    "n_decoder_layers": 0,
    "d_ff": 48,
    "max_len": 24,
    "positional": "learned",
    "published": Published(activation="gelu", embed_scale=False, embed_norm=True, n_token_types=2, norm_eps=1e-12),
}
LLAMA_LIKE = {
    "kind": "decoder-only",
    "vocab_size": 50,
    "d_model": 32,
    "n_heads": 4,
    "n_encoder_layers": 0,
    "n_decoder_layers": 2,
    "d_ff": 40,
    "max_len": 24,
    "positional": "rotary",
    "norm": "pre",
    "tie_embeddings": False,
}
LLAMA_SWITCHES = {"n_kv_heads": 2, "norm_type": "rms", "activation": "swiglu", "bias": False, "embed_scale": False}


def llama_like(**switches) -> dict:
    """LLAMA_LIKE's fields with its switches, `switches` changing some."""
    return LLAMA_LIKE | {"published": Published(**(LLAMA_SWITCHES | switches))}


def bert_like(**switches) -> dict:
    return BERT_LIKE | {"published": dataclasses.replace(BERT_LIKE["published"], **switches)}


@pytest.mark.parametrize(
    "fields",
    [
        BERT_LIKE,
        bert_like(mlm_head=True),
        llama_like(),
        llama_like() | {"kind": "encoder-decoder", "n_encoder_layers": 1},
    ],
)
def test_the_parameter_count_from_the_config_is_that_of_the_model(fields: dict) -> None:
    config = ModelConfig(**fields)
    assert config.n_parameters == sum(p.numel() for p in build_model(config).parameters())


@pytest.mark.parametrize(
    ("switches", "message"),
    [
        ({"n_kv_heads": 3}, r"n_heads \(4\) must be a multiple of n_kv_heads \(3\)"),
        ({"n_kv_heads": 0}, "n_kv_heads must be a positive integer"),
        ({"n_kv_heads": 8}, "n_heads .4. must be a multiple of n_kv_heads .8."),
        ({"n_kv_heads": 257}, "n_kv_heads is 257, above its bound of 256"),
        ({"norm_type": "batch"}, "norm_type must be one of"),
        ({"activation": "tanh"}, "activation must be one of"),
        ({"norm_eps": 0}, "norm_eps must be a positive number"),
        ({"rope_base": "1e4"}, "rope_base must be a positive number"),
        ({"bias": 0}, "bias must be true or false"),
        ({"n_token_types": -1}, "n_token_types must be a non-negative integer"),
        ({"embed_norm": True}, "BERT's: they need kind='encoder-only', got 'decoder-only'"),
    ],
)
def test_an_invalid_switch_raises_config_error_naming_it(switches: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**llama_like(**switches))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"d_model": 36, "n_heads": 4}, "d_head must be even"),  # d_head 9: rotary pairs
        ({"n_decoder_layers": 0}, "needs n_decoder_layers >= 1"),
        ({"published": {"bias": False}}, "published must be a Published group or None, got dict"),
    ],
)
def test_an_invalid_field_beside_the_switches_raises_config_error_naming_it(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**(llama_like(n_kv_heads=None) | overrides))


def test_an_encoder_only_model_needs_encoder_layers_but_no_decoder_layers() -> None:
    with pytest.raises(ConfigError, match="encoder-only model needs n_encoder_layers >= 1"):
        ModelConfig(**(BERT_LIKE | {"n_encoder_layers": 0}))
    model = build_model(ModelConfig(**BERT_LIKE))
    assert isinstance(model, EncoderOnly) and model.decoder is None


def test_the_shipped_defaults_are_the_2017_model() -> None:
    config = ModelConfig(kind="decoder-only", vocab_size=50)
    assert config.published is None and config.switches == PAPER == Published() and config.kv_heads == 4
    assert (PAPER.n_kv_heads, PAPER.norm_type, PAPER.activation, PAPER.bias) == (None, "layer", "relu", True)
    assert (PAPER.embed_scale, PAPER.embed_norm, PAPER.n_token_types) == (True, False, 0)


LM = {"kind": "decoder-only", "vocab_size": 50}
FLAT_PAPER = {
    **LM,
    **{"n_kv_heads": None, "norm_type": "layer", "norm_eps": 1e-05, "activation": "relu", "bias": True},
    **{"embed_scale": True, "embed_norm": False, "n_token_types": 0, "rope_base": 10000.0, "mlm_head": False},
}


def test_a_flat_config_with_every_switch_at_its_default_reads_as_the_papers_model() -> None:
    """The shipped checkpoints' config.json files hold every switch beside the paper's fields."""
    config = ModelConfig.from_dict(FLAT_PAPER)
    assert config == ModelConfig(kind="decoder-only", vocab_size=50) and config.published is None
    assert ModelConfig.from_dict(config.to_dict()) == config and config.to_dict()["published"] is None


def test_a_flat_config_with_switches_reads_as_its_published_group_and_writes_it_nested() -> None:
    flat = FLAT_PAPER | {"activation": "gelu_tanh", "embed_scale": False, "positional": "learned"}
    config = ModelConfig.from_dict(flat)
    assert config.published == Published(activation="gelu_tanh", embed_scale=False)
    nested = config.to_dict()
    assert nested["published"]["activation"] == "gelu_tanh" and "activation" not in nested
    assert ModelConfig.from_dict(nested) == config
    assert ModelConfig.from_dict(LM | {"published": {}}).published is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (FLAT_PAPER | {"published": None}, "given both beside the other fields and in published"),
        (LM | {"published": {"gelu": True}}, r"unknown published keys: \['gelu'\]"),
        (LM | {"published": [1]}, "published must be a JSON object or null"),
        (FLAT_PAPER | {"activation": "tanh"}, "activation must be one of"),
    ],
)
def test_a_config_whose_switches_cannot_be_read_names_what_is_wrong(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig.from_dict(data)


@torch.no_grad()
def test_the_encoder_only_trace_holds_every_layer_and_its_positions() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(**BERT_LIKE)).eval()
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14]])  # row 0 padded with pad_id 0
    logits, trace = model(ids)
    assert logits.shape == (2, 6, 50)
    assert list(trace.attention) == ["encoder.layers.0.self_attn", "encoder.layers.1.self_attn"]
    assert torch.equal(trace.source_ids, ids) and trace.target_ids.shape == (2, 0)
    assert torch.equal(trace.positional_encoding["encoder"], model.positions.table[:6])
    rec = trace.attention["encoder.layers.1.self_attn"]
    assert rec.mask[1].all()  # bidirectional: no no-peek rule
    assert not rec.weights[0, :, :, 4:].any() and not rec.weights[0, :, 4:].any()  # padding neither sees nor is seen


@torch.no_grad()
def test_the_fused_path_equals_the_recorded_one_with_rotary_and_grouped_heads() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(**llama_like())).eval()
    ids = torch.randint(4, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    recorded, trace = model(ids)
    fused, fused_trace = model(ids, record=False)
    torch.testing.assert_close(fused, recorded, atol=1e-5, rtol=1e-5)
    assert fused_trace.attention["decoder.layers.0.self_attn"].weights is None


def test_rotary_scores_depend_on_the_distance_between_positions_only() -> None:
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8, generator=gen), torch.randn(1, 1, 1, 8, generator=gen)

    def score(m: int, n: int) -> float:
        rows = rotary_table(torch.arange(20), 8)
        return float((rotate(q, rows[m : m + 1]) * rotate(k, rows[n : n + 1])).sum())

    assert score(7, 3) == pytest.approx(score(14, 10), abs=1e-5)
    assert score(7, 3) != pytest.approx(score(7, 4), abs=1e-3)


def test_the_rotary_positional_rows_are_the_rotations_not_added_vectors() -> None:
    model = build_model(ModelConfig(**llama_like())).eval()
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        _, trace = model(ids)
    rows = trace.positional_encoding["decoder"]
    assert rows.shape == (3, 8)  # (T, d_head): cos | sin of each pair's angle
    torch.testing.assert_close(rows[:, :4] ** 2 + rows[:, 4:] ** 2, torch.ones(3, 4))
