"""analysis.circuits: composition scores from the weights, checked against dense products and the model's own
projections, and on the induction model's circuit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import atlas
from analysis.circuits import MODES, composition, head_matrices
from analysis.induction import measure
from inference.checkpoint import load_checkpoint
from model.config import ModelConfig, Published
from model.factory import build_model
from model.names import sublayer_layer

CHECKPOINTS = Path(__file__).resolve().parent.parent / "checkpoints"  # the shipped ones
SIZES = {"vocab_size": 40, "d_model": 32, "n_heads": 4, "d_ff": 48, "max_len": 24, "dropout": 0.0}


def lm(seed: int = 0, layers: int = 3, **fields) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model(
        ModelConfig(kind="decoder-only", n_decoder_layers=layers, n_encoder_layers=0, **SIZES, **fields)
    )
    with torch.no_grad():  # gains away from 1, so that folding them matters
        for layer in model.decoder.layers:
            layer.sublayer[0].norm.weight.uniform_(0.5, 2.0)
    return model.eval()


def dense_scores(m) -> dict[str, np.ndarray]:
    """The definition, with every d_model × d_model matrix built: ‖L R‖_F / (‖L‖_F ‖R‖_F)."""
    n = len(m.w_q)
    ov = [m.w_v[i] @ m.w_o[i] for i in range(n)]
    qk = [m.w_q[i] @ m.w_k[i].T for i in range(n)]
    right = {"Q": qk, "K": [x.T for x in qk], "V": ov}
    layer = np.repeat(np.arange(m.n_layers), m.n_heads)
    out = {}
    for mode, mats in right.items():
        s = np.full((n, n), np.nan)
        for i in range(n):
            for j in range(n):
                if layer[j] > layer[i]:
                    s[i, j] = np.linalg.norm(ov[i] @ mats[j]) / (np.linalg.norm(ov[i]) * np.linalg.norm(mats[j]))
        out[mode] = s.reshape(m.n_layers, m.n_heads, m.n_layers, m.n_heads)
    return out


@pytest.mark.parametrize(
    "fields", [{"norm": "pre"}, {"norm": "post"}, {"norm": "pre", "published": Published(n_kv_heads=2)}]
)
def test_the_factored_scores_equal_the_dense_products(fields) -> None:
    model = lm(**fields)
    scores, dense = composition(model).scores, dense_scores(head_matrices(model))
    for mode in MODES:
        np.testing.assert_allclose(scores[mode], dense[mode], rtol=1e-9, atol=1e-12)
        finite = np.isfinite(scores[mode])
        assert finite.sum() == 3 * 16 and np.all((scores[mode][finite] > 0) & (scores[mode][finite] <= 1))


@pytest.mark.parametrize("fields", [{"norm": "pre"}, {"norm": "pre", "published": Published(n_kv_heads=2)}])
def test_the_head_matrices_are_the_projections_the_model_runs(fields) -> None:
    """x·W_Q^h (gain folded) is head h's query of the normed stream without bias; Σ_h z_h·W_O^h is w_o's output
    less its bias (centred: less its mean over d_model, which the next LayerNorm removes)."""
    model = lm(**fields)
    m = head_matrices(model)
    layer = model.decoder.layers[1]
    attn, norm = layer.self_attn, layer.sublayer[0].norm
    x = torch.randn(5, 32, dtype=torch.float64)
    normed = torch.nn.functional.layer_norm(x, (32,))  # the norm before its gain (and bias, left out)
    with torch.no_grad():
        for name, linear in (("w_q", attn.w_q), ("w_k", attn.w_k), ("w_v", attn.w_v)):
            heads = linear.weight.shape[0] // attn.d_head
            projected = (normed * norm.weight.double()) @ linear.weight.double().T  # (5, heads · d_head)
            per_head = projected.reshape(5, heads, attn.d_head).repeat_interleave(4 // heads, dim=1)
            for h in range(4):
                np.testing.assert_allclose(normed.numpy() @ getattr(m, name)[4 + h], per_head[:, h].numpy(), atol=1e-9)
        z = torch.randn(5, 4 * attn.d_head, dtype=torch.float64)
        out = z @ attn.w_o.weight.double().T
        out = out - out.mean(dim=-1, keepdim=True)
        mine = sum(z[:, h * attn.d_head : (h + 1) * attn.d_head].numpy() @ m.w_o[4 + h] for h in range(4))
        np.testing.assert_allclose(mine, out.numpy(), atol=1e-9)


def test_the_induction_heads_keys_read_the_previous_token_head_most() -> None:
    """Elhage et al.'s induction circuit, in the shipped induction model: of every earlier head, its best induction
    head's keys K-compose most with its best previous-token head (both as the probe finds them)."""
    ckpt = load_checkpoint(CHECKPOINTS / "induction")
    report = measure(ckpt.model, ckpt.config.vocab_size, ckpt.config.bos_id)
    sublayer, head, _ = report.best(report.induction)
    previous_sublayer, previous_head, _ = report.best(report.previous_token)
    assert sublayer_layer(sublayer) == 1 and sublayer_layer(previous_sublayer) == 0
    top = composition(ckpt.model).top_sources("K", sublayer_layer(sublayer), head, k=1)[0]
    assert top[:2] == (sublayer_layer(previous_sublayer), previous_head)


def test_the_notebook_draws_and_tables_them_from_one_and_names_bad_arguments() -> None:
    ckpt = load_checkpoint(CHECKPOINTS / "induction")
    fig = atlas.composition(ckpt)
    assert list(fig.data[0].y) == ["L1 H1", "L1 H2", "L1 H3", "L1 H4"] and list(fig.data[0].x)[0] == "L2 H1"
    assert fig.layout.title.text.startswith("K-composition")
    table = atlas.composition_scores(ckpt)
    assert len(table) == 16 and table["earlier layer"].min() == 1 and table["later layer"].max() == 2
    assert table["K"].is_monotonic_decreasing
    with pytest.raises(ValueError, match="mode must be one of 'Q', 'K', 'V'"):
        atlas.composition(ckpt, "O")
    with pytest.raises(ValueError, match="no encoder stack"):
        atlas.composition(ckpt, stack="encoder")
    one_layer = load_checkpoint(CHECKPOINTS / "fivegram-1L-8H")
    with pytest.raises(ValueError, match="a model of one layer has no pair"):
        atlas.composition(one_layer)
    for chance in (None, 0):  # the table says the same, with or without a baseline
        with pytest.raises(ValueError, match="a model of one layer has no pair"):
            atlas.composition_scores(one_layer, baseline=chance)


@pytest.mark.parametrize("source", ["tiny", "lm-english"])
def test_gram_matrices_score_every_pair_as_the_pairs_one_by_one_do(source) -> None:
    from analysis.circuits import composition_of

    model = lm(norm="pre", layers=4) if source == "tiny" else load_checkpoint(CHECKPOINTS / source).model
    m = head_matrices(model)
    by_gram, by_pairs = composition_of(m, gram=True).scores, composition_of(m, gram=False).scores
    for mode in MODES:
        np.testing.assert_allclose(by_gram[mode], by_pairs[mode], rtol=1e-9, atol=1e-12)
        assert np.nanmin(by_gram[mode]) > 0  # the pairs are scored, not left out


def test_the_gram_path_holds_within_its_byte_budget(monkeypatch) -> None:
    from analysis import circuits

    m = head_matrices(lm(norm="pre"))
    packed = m.n_layers * m.n_heads * 32 * 33 // 2 * 8  # every head's d_model × d_model triangle, float64
    real, calls = circuits._by_gram, []
    monkeypatch.setattr(circuits, "_by_gram", lambda *a: calls.append("gram") or real(*a))
    for budget, fits in ((packed, True), (packed - 1, False)):
        monkeypatch.setattr(circuits, "GRAM_BYTES", budget)
        assert circuits.gram_fits(m) is fits
        calls.clear()
        circuits.composition_of(m)
        assert calls == (["gram"] * 3 if fits else [])
