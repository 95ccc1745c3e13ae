"""Patching a translator: two sources of the same token count, one target held fixed (teacher-forced), every head
and the stream entering every layer of both stacks, for our shipped translator and for `transformers'` Marian,
BART and T5. Each number is checked against a run of our own: the output projection's input replaced by plain
torch (a pre-hook on ours, the projection's forward swapped on theirs), the logit difference read off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import atlas
from analysis.patching import PairError
from inference.text import clean_text, encode_source
from model.forward import forward

transformers = pytest.importorskip("transformers")
from seq2seq_models import FAMILIES, OTHER, SOURCE, TARGET, tiny, word_tokenizer  # noqa: E402

CLEAN, CORRUPTED = "The cat sat on the mat.", "The dog sat on the mat."
TOL = 1e-5


@pytest.fixture(scope="module")
def translator():
    return atlas.load("translate-en-de")


def _own_heads_metric(ckpt, sources, target, sublayer, head, position, answer, versus):
    """Our model's metric with head `head` of `sublayer` from the clean run: the W^O input swapped by a pre-hook."""
    w_o = dict(ckpt.model.named_modules())[f"{sublayer}.w_o"]
    d_head = ckpt.config.d_head
    kept = {}
    hook = w_o.register_forward_pre_hook(lambda _m, args: kept.setdefault("clean", args[0].clone()))
    with torch.no_grad():
        forward(ckpt.model, target, sources[0], record=False)
    hook.remove()

    def swap(_m, args):
        x = args[0].clone()
        x[..., head * d_head : (head + 1) * d_head] = kept["clean"][..., head * d_head : (head + 1) * d_head]
        return (x,)

    hook = w_o.register_forward_pre_hook(swap)
    with torch.no_grad():
        logits, _ = forward(ckpt.model, target, sources[1], record=False)
    hook.remove()
    return float(logits[0, position, answer] - logits[0, position, versus])


def test_our_translators_heads_equal_a_pass_of_our_own(translator):
    table = atlas.patch_scores(translator, CLEAN, CORRUPTED)
    assert set(table["attention"]) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    cfg = translator.config
    assert len(table) == (cfg.n_encoder_layers + 2 * cfg.n_decoder_layers) * cfg.n_heads
    sources = [torch.tensor([encode_source(translator, clean_text(t).text, [])]) for t in (CLEAN, CORRUPTED)]
    target = torch.tensor([atlas.analyze(translator, CLEAN).target_ids])
    pieces = translator.tokenizer.pieces(list(range(cfg.vocab_size)))
    answer, versus = pieces.index(table.attrs["answer"]), pieces.index(table.attrs["versus"])
    position = table.attrs["position"] - 1
    span = table.attrs["clean"] - table.attrs["corrupted"]
    for _, row in table.iloc[[0, 1, 2, -1]].iterrows():
        stack, type_ = row["attention"].split(".")
        sublayer = f"{stack}.layers.{row['layer'] - 1}.{type_}"
        own = _own_heads_metric(translator, sources, target, sublayer, row["head"] - 1, position, answer, versus)
        assert abs((own - table.attrs["corrupted"]) / span - row["restored"]) < TOL


def test_our_translators_stream_restores_exactly_where_the_sources_differ(translator):
    table = atlas.patch_scores(translator, CLEAN, CORRUPTED, what="residual")
    first = table[(table["stack"] == "encoder") & (table["layer"] == 1)].set_index("position")["restored"]
    assert abs(first[2] - 1.0) < TOL  # ▁cat/▁dog: the only input that differs, so the whole difference
    assert np.abs(first.drop(2).to_numpy()).max() < TOL  # the same tokens: nothing to restore
    decoder = table[table["stack"] == "decoder"]
    assert len(decoder) == translator.config.n_decoder_layers * len(atlas.analyze(translator, CLEAN).target_ids)
    assert atlas.patch(translator, CLEAN, CORRUPTED, what="residual").data


def test_a_translators_sources_of_other_lengths_are_one_line(translator):
    with pytest.raises(PairError, match=r"^patching pairs source position with position") as caught:
        atlas.patch_scores(translator, CLEAN, "The big dog sat on the mat.")
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"^attribution patching approximates the heads"):
        atlas.patch_scores(translator, CLEAN, CORRUPTED, what="residual", approximate=True)


def _their_heads_metric(model, sources, target, path, head, d_head, position, answer, versus):
    """A transformers model's metric with one head from the clean run: the output projection's forward swapped
    for one that takes that head's slice of its input from the clean run (no hooks)."""
    proj = dict(model.named_modules())[path]
    original, kept = proj.forward, {}

    def keep(x):
        kept["clean"] = x.clone()
        return original(x)

    def swap(x):
        x = x.clone()
        x[..., head * d_head : (head + 1) * d_head] = kept["clean"][..., head * d_head : (head + 1) * d_head]
        return original(x)

    try:
        with torch.no_grad():
            proj.forward = keep
            model(input_ids=sources[0], decoder_input_ids=target)
            proj.forward = swap
            logits = model(input_ids=sources[1], decoder_input_ids=target).logits
    finally:
        proj.forward = original
    return float(logits[0, position, answer] - logits[0, position, versus])


@pytest.mark.parametrize("family", FAMILIES)
def test_their_heads_and_stream_equal_a_pass_of_our_own(family):
    model, tokenizer = tiny(family), word_tokenizer()
    asked = {"target": TARGET, "position": 3, "answer": "Katze", "versus": "Hund", "tokenizer": tokenizer}
    table = atlas.patch_scores(model, SOURCE, OTHER, **asked)
    assert len(table) == (2 + 2 * 2) * 2
    sources = [tokenizer(t, return_tensors="pt")["input_ids"] for t in (SOURCE, OTHER)]
    target = torch.tensor([[model.config.decoder_start_token_id, *tokenizer(text_target=TARGET)["input_ids"]]])
    answer, versus = tokenizer.convert_tokens_to_ids(["Katze", "Hund"])
    span = table.attrs["clean"] - table.attrs["corrupted"]
    paths = {"marian": "model.{stack}.layers.{i}.{attn}.out_proj", "bart": "model.{stack}.layers.{i}.{attn}.out_proj"}
    t5 = {
        "self_attn": "{stack}.block.{i}.layer.0.SelfAttention.o",
        "cross_attn": "{stack}.block.{i}.layer.1.EncDecAttention.o",
    }
    for _, row in table.iterrows():
        stack, type_ = row["attention"].split(".")
        attn = {"self_attn": "self_attn", "cross_attn": "encoder_attn"}[type_]
        pattern = t5[type_] if family == "t5" else paths[family]
        path = pattern.format(stack=stack, i=row["layer"] - 1, attn=attn)
        own = _their_heads_metric(model, sources, target, path, row["head"] - 1, 8, 2, answer, versus)
        assert abs((own - table.attrs["corrupted"]) / span - row["restored"]) < TOL, (path, row["head"])
    stream = atlas.patch_scores(model, SOURCE, "the dog sat on the mat .", what="residual", **asked)  # one word apart
    first = stream[(stream["stack"] == "encoder") & (stream["layer"] == 1)].set_index("position")["restored"]
    assert abs(first[2] - 1.0) < 1e-6 and np.abs(first.drop(2).to_numpy()).max() < 1e-6
    assert len(stream[stream["stack"] == "decoder"]) == 2 * target.shape[1]


def test_their_sources_that_never_differ_are_one_line():
    with pytest.raises(PairError, match=r"^the two sources give the same top prediction") as caught:
        atlas.patch_scores(tiny("bart"), SOURCE, SOURCE, tokenizer=word_tokenizer(), target=TARGET)
    assert "\n" not in str(caught.value)


def test_attribution_patching_a_translator_is_the_gradient_of_a_pass_of_our_own(translator):
    """(clean − corrupted) head output · ∂metric/∂(head output), the gradient taken here through a zero added to
    W^O's input by a plain-torch pre-hook; close to the exact patches, and no gradient left on the model."""
    approx = atlas.patch_scores(translator, CLEAN, CORRUPTED, approximate=True)
    exact = atlas.patch_scores(translator, CLEAN, CORRUPTED)
    assert approx.attrs["approximate"] and not exact.attrs["approximate"]
    keys = ["attention", "layer", "head"]
    joined = approx.set_index(keys)["restored"].to_frame("approx").join(exact.set_index(keys)["restored"])
    assert np.corrcoef(joined["approx"], joined["restored"])[0, 1] > 0.9
    cfg = translator.config
    sources = [torch.tensor([encode_source(translator, clean_text(t).text, [])]) for t in (CLEAN, CORRUPTED)]
    target = torch.tensor([atlas.analyze(translator, CLEAN).target_ids])
    pieces = translator.tokenizer.pieces(list(range(cfg.vocab_size)))
    answer, versus = pieces.index(approx.attrs["answer"]), pieces.index(approx.attrs["versus"])
    position, span = approx.attrs["position"] - 1, approx.attrs["clean"] - approx.attrs["corrupted"]
    for _, row in approx.iloc[[0, -1]].iterrows():
        stack, type_ = row["attention"].split(".")
        w_o = dict(translator.model.named_modules())[f"{stack}.layers.{row['layer'] - 1}.{type_}.w_o"]
        kept: dict = {}
        cut = slice((row["head"] - 1) * cfg.d_head, row["head"] * cfg.d_head)
        hook = w_o.register_forward_pre_hook(
            lambda _m, args, kept=kept: kept.setdefault("clean", args[0].detach().clone())
        )
        with torch.no_grad():
            forward(translator.model, target, sources[0], record=False)
        hook.remove()

        def nudged(_m, args, kept=kept):
            kept["corrupted"] = args[0].detach().clone()
            kept["nudge"] = torch.zeros_like(args[0], requires_grad=True)
            return (args[0] + kept["nudge"],)

        hook = w_o.register_forward_pre_hook(nudged)
        try:
            logits, _ = forward(translator.model, target, sources[1], record=False)
            (logits[0, position, answer] - logits[0, position, versus]).backward()
        finally:
            hook.remove()
            translator.model.zero_grad(set_to_none=True)
        delta = (kept["clean"] - kept["corrupted"])[..., cut]
        own = float((delta * kept["nudge"].grad[..., cut]).sum()) / span
        assert abs(own - row["restored"]) < TOL
    assert all(p.grad is None for p in translator.model.parameters())
