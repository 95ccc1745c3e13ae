"""Activation patching (analysis.patching) and the forward pass's Patch (model.attention): patching nothing gives 0,
the whole stream entering a layer gives 1, each residual cell and a head's patch equal a plain-torch computation,
batches change nothing, the induction model's layer-2 head carries the copied token, and attribution patching
agrees with the runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.patching import (
    PairError,
    _normalised,
    _patched,
    _residual_patch,
    attribution_patch,
    pair_ids,
    patch,
    prepare,
)
from inference.checkpoint import Checkpoint, load_checkpoint
from model.attention import Patch, attention_mask, padding_mask
from model.forward import forward

ROOT = Path(__file__).resolve().parents[1]
# a repeated run of random words (clean) and the same with its second half changed (corrupted): the clean text's
# next token is the copy of what followed "garden" the first time
CLEAN = "freedom election movies garden river freedom election movies garden"
CORRUPTED = "freedom election movies garden river window science market doctor"
LM_CLEAN, LM_CORRUPTED = "The cat sat on the mat because it was", "The dog sat on the mat because it was"


@pytest.fixture(scope="module")
def induction() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "induction")


@pytest.fixture(scope="module")
def lm() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "lm-english")


def lm_pair(lm: Checkpoint) -> tuple[int, int]:
    """Two tokens for lm-english's pair: its top guess after the clean text and its runner-up."""
    ids, _ = pair_ids(lm, LM_CLEAN, LM_CORRUPTED)
    logits = forward(lm.model, ids, record=False)[0][0, -1]
    order = logits.argsort(descending=True).tolist()
    return order[0], order[1]


def test_a_patch_of_nothing_and_an_added_zero_change_nothing(lm) -> None:
    ids, _ = pair_ids(lm, LM_CLEAN, LM_CORRUPTED)
    plain, trace = forward(lm.model, ids, record=True, activations=True)
    heads = torch.zeros(1, lm.config.n_heads, dtype=torch.bool)
    rec = trace.attention["decoder.layers.2.self_attn"]
    other = torch.randn_like(rec.weights @ rec.values)
    stream = torch.randn_like(trace.activations["decoder.layers.3.resid_pre"])
    unpatched = {
        "decoder.layers.2.self_attn": Patch(other, heads),
        "decoder.layers.3.resid_pre": Patch(stream, torch.zeros(1, ids.shape[1], dtype=torch.bool)),
    }
    torch.testing.assert_close(forward(lm.model, ids, record=False, ablate=unpatched)[0], plain, atol=1e-5, rtol=0)
    added = {"decoder.layers.2.self_attn": Patch(torch.zeros_like(other), ~heads, added=True)}
    torch.testing.assert_close(forward(lm.model, ids, record=False, ablate=added)[0], plain, atol=1e-5, rtol=0)


def whole_layer_input(
    ckpt: Checkpoint, clean: str, corrupted: str, layer: int, answer: int | None = None, versus: int | None = None
) -> float:
    """The normalised metric with the whole stream entering `layer` (every position) taken from the clean run, by
    the residual patch `patch` applies one position at a time: 1 for any layer of a decoder-only model, whose
    positions see nothing but that stream (a check of the method)."""
    runs = prepare(ckpt, clean, corrupted, answer, versus)
    layers, steps = len(ckpt.model.decoder.layers), runs.clean_ids.shape[1]
    value = _patched(ckpt, runs, [_residual_patch(runs, layer, list(range(steps)), layers)])
    return float(_normalised(value.numpy(), runs)[0])


def test_the_whole_stream_entering_any_layer_restores_the_clean_answer(induction, lm) -> None:
    for layer in range(2):
        assert whole_layer_input(induction, CLEAN, CORRUPTED, layer) == pytest.approx(1.0, abs=1e-4)
    answer, versus = lm_pair(lm)
    for layer in (0, 5):
        value = whole_layer_input(lm, LM_CLEAN, LM_CORRUPTED, layer, answer, versus)
        assert value == pytest.approx(1.0, abs=1e-4)


def test_the_stream_where_both_texts_agree_changes_nothing(induction) -> None:
    result = patch(induction, CLEAN, CORRUPTED, "residual")
    same = 5  # <s> and the first four words
    assert result.scores.shape == (2, 10)
    np.testing.assert_allclose(result.scores[0, :same], 0.0, atol=1e-6)  # the same tokens entering layer 1
    assert result.scores[:, :same].max() < 1e-4 and result.scores[-1, -1] > 0.9  # the last token, before layer 2


def residual_patched_by_hand(lm: Checkpoint, streams: list[torch.Tensor], layer: int, position: int) -> torch.Tensor:
    """The corrupted text run layer by layer, its stream entering `layer` at `position` replaced by the clean
    run's there (`streams`: the clean run's stream entering each layer) and nowhere else: the logits at the last
    position."""
    _, corrupted_ids = pair_ids(lm, LM_CLEAN, LM_CORRUPTED)
    model, valid = lm.model, padding_mask(corrupted_ids, lm.config.pad_id)
    mask = attention_mask(valid, valid, causal=True)
    x, _ = model.with_positions(model.embed(corrupted_ids), 0)
    for i, decoder_layer in enumerate(model.decoder.layers):
        if i == layer:
            x = x.clone()
            x[0, position] = streams[i][0, position]
        x, _, _ = decoder_layer(x, mask, None, None, {}, False)
    return model.logits(model.decoder.norm(x))[0, -1]


@torch.inference_mode()
def test_each_residual_patch_equals_the_stream_patched_by_hand_at_one_layer_only(lm) -> None:
    """Cell by cell: the clean stream goes in at its own layer and position, and later layers compute on from it
    (a patch that also overwrote the later layers' input would restore more than the one cell)."""
    answer, versus = lm_pair(lm)
    result = patch(lm, LM_CLEAN, LM_CORRUPTED, "residual", answer, versus)
    layers, steps = result.scores.shape
    assert layers == lm.config.n_decoder_layers > 2
    _, clean = forward(lm.model, pair_ids(lm, LM_CLEAN, LM_CORRUPTED)[0], record=False, activations=True)
    streams = [clean.activations[f"decoder.layers.{i}.resid_pre"] for i in range(layers)]
    for layer in range(layers):
        for position in range(steps):
            logits = residual_patched_by_hand(lm, streams, layer, position)
            value = float(logits[answer] - logits[versus])
            expected = (value - result.corrupted) / (result.clean - result.corrupted)
            # batched and one by one, float32 sums differ in their last bits (1.2e-4 seen); a leak differs by 0.1s
            assert result.scores[layer, position] == pytest.approx(expected, abs=1e-3), (layer, position)


def test_a_heads_patch_in_the_last_layer_equals_plain_torch(lm) -> None:
    """Patching head h of the last layer changes the corrupted stream after its attention, at the last position,
    by exactly W_O,h (z_clean − z_corrupted); the layer's feed-forward, the final norm and the generator then give
    the patched logits."""
    answer, versus = lm_pair(lm)
    result = patch(lm, LM_CLEAN, LM_CORRUPTED, "heads", answer, versus)
    clean_ids, corrupted_ids = pair_ids(lm, LM_CLEAN, LM_CORRUPTED)
    _, clean = forward(lm.model, clean_ids, record=True)
    logits, corrupted = forward(lm.model, corrupted_ids, record=True, activations=True)
    last, model = lm.config.n_decoder_layers - 1, lm.model
    sublayer, d_head = model.decoder.layers[last].self_attn, lm.config.d_model // lm.config.n_heads
    name = f"decoder.layers.{last}.self_attn"
    mid = corrupted.activations[f"decoder.layers.{last}.resid_mid"][0, -1]
    layer = model.decoder.layers[last]

    def metric(row: torch.Tensor) -> float:
        return float(row[answer] - row[versus])

    clean_metric = metric(forward(lm.model, clean_ids, record=False)[0][0, -1])
    corrupted_metric = metric(logits[0, -1])
    for h in range(lm.config.n_heads):
        z = [(t.attention[name].weights @ t.attention[name].values)[0, h, -1] for t in (clean, corrupted)]
        delta = sublayer.w_o.weight[:, h * d_head : (h + 1) * d_head] @ (z[0] - z[1])
        after = mid + delta
        after = after + layer.feed_forward(layer.sublayer[1].input(after))  # pre-norm: x + FF(LN(x))
        patched = model.generator(model.decoder.norm(after))
        expected = (metric(patched) - corrupted_metric) / (clean_metric - corrupted_metric)
        assert result.scores[last, h] == pytest.approx(expected, abs=1e-4)


def test_batches_change_nothing_and_progress_is_told(induction) -> None:
    calls = []
    one = patch(induction, CLEAN, CORRUPTED, "heads", batch=1)
    many = patch(induction, CLEAN, CORRUPTED, "heads", progress=lambda done, total: calls.append((done, total)))
    np.testing.assert_allclose(one.scores, many.scores, atol=1e-5)
    assert calls == [(0, 8), (8, 8)]


def test_the_induction_models_copying_is_carried_by_a_layer_two_head(induction) -> None:
    result = patch(induction, CLEAN, CORRUPTED, "heads")
    assert induction.tokenizer.pieces([result.answer]) == ["▁river"]
    layer, head = np.unravel_index(np.argmax(result.scores), result.scores.shape)
    assert layer == 1 and result.scores[layer, head] > 2 * np.abs(result.scores[0]).max()


def test_attribution_patching_agrees_with_the_patched_runs(induction, lm) -> None:
    for ckpt, clean, corrupted, tokens in (
        (induction, CLEAN, CORRUPTED, (None, None)),
        (lm, LM_CLEAN, LM_CORRUPTED, lm_pair(lm)),
    ):
        exact = patch(ckpt, clean, corrupted, "heads", *tokens)
        approx = attribution_patch(ckpt, clean, corrupted, *tokens)
        assert approx.approximate and not exact.approximate and approx.scores.shape == exact.scores.shape
        assert np.corrcoef(exact.scores.ravel(), approx.scores.ravel())[0, 1] > 0.8
    assert all(p.grad is None for p in lm.model.parameters())  # the shared model gathers no gradient


def test_pairs_that_cannot_be_patched_say_why(induction, tiny_checkpoints) -> None:
    with pytest.raises(PairError, match="the first text has 9 tokens and the second 10"):
        patch(induction, CLEAN, CORRUPTED + " river")
    with pytest.raises(PairError, match="both texts give the same next token"):
        patch(induction, CLEAN, CLEAN)
    translator = load_checkpoint(tiny_checkpoints["encoder-decoder"])
    with pytest.raises(PairError, match="choose a language model"):
        patch(translator, "abc", "abd")
    with pytest.raises(ValueError, match="what is one of 'heads', 'residual'"):
        patch(induction, CLEAN, CORRUPTED, "everything")
