"""`agreement` on a translator: one output token, every head of both stacks by each method, the target held fixed.
Each column is held to a computation of its own: the head's zeroed W^O input by a plain-torch pre-hook (ablation),
and the tools each method is (patch_scores of the same pair, logit_attribution_scores at the same position)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import atlas
from analysis.patching import PairError
from inference.text import clean_text, encode_source
from model.forward import forward

CLEAN, CORRUPTED = "The cat sat on the mat.", "The dog sat on the mat."
TOL = 1e-5


@pytest.fixture(scope="module")
def translator():
    return atlas.load("translate-en-de")


@pytest.fixture(scope="module")
def table(translator):
    return atlas.agreement(translator, CLEAN, corrupted=CORRUPTED)


def test_every_head_of_both_stacks_has_a_row(translator, table):
    cfg = translator.config
    assert len(table) == (cfg.n_encoder_layers + 2 * cfg.n_decoder_layers) * cfg.n_heads
    encoder = table.loc["encoder.self_attn"]
    assert encoder["attention"].isna().all() and encoder["direct logit attribution"].isna().all()
    assert encoder["ablation (zero)"].notna().all() and encoder["activation patching"].notna().all()
    assert table["attribution patching"].notna().all() and table.attrs["note"] == ""
    assert table.attrs["corrupted"] == CORRUPTED and table.attrs["position"] == 1


def test_patching_and_attribution_are_the_tools_at_the_same_position(translator, table):
    patched = atlas.patch_scores(
        translator, CLEAN, CORRUPTED, position=1, answer=table.attrs["answer"], versus=table.attrs["versus"]
    )
    mine = patched.set_index(["attention", "layer", "head"])["restored"]
    np.testing.assert_allclose(table["activation patching"].loc[mine.index], mine, atol=TOL)
    parts = atlas.logit_attribution_scores(translator, CLEAN, position=1)
    heads = parts.dropna(subset=["head"])
    assert len(heads) == 2 * translator.config.n_decoder_layers * translator.config.n_heads
    labels = {"Decoder self-attention (masked)": "decoder.self_attn"}
    for _, row in heads.iterrows():
        attention = labels.get(row["attention"], "decoder.cross_attn")
        got = table.loc[(attention, int(row["layer"]), int(row["head"])), "direct logit attribution"]
        assert abs(got - row["contribution"]) < TOL


def test_ablation_is_the_kl_of_a_head_zeroed_by_hand(translator, table):
    source = torch.tensor([encode_source(translator, clean_text(CLEAN).text, [])])
    target = torch.tensor([table.attrs["target_ids"]])
    d_head = translator.config.d_head
    with torch.no_grad():
        before = torch.log_softmax(forward(translator.model, target, source, record=False)[0][0, 0].double(), -1)
    for (attention, layer, head), kl in table["ablation (zero)"].nlargest(3).items():
        stack, type_ = attention.split(".")
        w_o = dict(translator.model.named_modules())[f"{stack}.layers.{layer - 1}.{type_}.w_o"]

        def zeroed(_m, args, h=head - 1):
            x = args[0].clone()
            x[..., h * d_head : (h + 1) * d_head] = 0.0
            return (x,)

        hook = w_o.register_forward_pre_hook(zeroed)
        try:
            with torch.no_grad():
                logits = forward(translator.model, target, source, record=False)[0][0, 0].double()
        finally:
            hook.remove()
        after = torch.log_softmax(logits, -1)
        assert abs(float((before.exp() * (before - after)).sum()) - kl) < TOL


def test_a_corrupted_source_of_another_length_is_one_line(translator):
    with pytest.raises(PairError, match=r"^the corrupted source has \d+ tokens and the source \d+") as caught:
        atlas.agreement(translator, CLEAN, corrupted="The big dog sat on the mat.")
    assert "\n" not in str(caught.value)
    shuffled = atlas.agreement(translator, CLEAN)
    assert shuffled.attrs["corrupted_from"] == "the source with the tokens between its first and last shuffled"


@pytest.mark.parametrize("family", ["marian", "bart", "t5"])
def test_a_transformers_translator_is_compared_as_ours(family):
    from seq2seq_models import OTHER, SOURCE, tiny, word_tokenizer

    model, tokenizer = tiny(family), word_tokenizer()
    table = atlas.agreement(model, SOURCE, position=3, corrupted=OTHER, tokenizer=tokenizer)
    assert len(table) == 3 * 2 * 2 and table["direct logit attribution"].isna().all()
    asked = {"position": 3, "answer": table.attrs["answer"], "versus": table.attrs["versus"], "tokenizer": tokenizer}
    patched = atlas.patch_scores(model, SOURCE, OTHER, **asked).set_index(["attention", "layer", "head"])
    np.testing.assert_allclose(table["activation patching"].loc[patched.index], patched["restored"], atol=TOL)
    source = torch.tensor([tokenizer(SOURCE)["input_ids"]])
    target = torch.tensor([table.attrs["target_ids"]])
    with torch.no_grad():
        before = torch.log_softmax(model(input_ids=source, decoder_input_ids=target).logits[0, 2].double(), -1)
    (attention, layer, head), kl = next(iter(table["ablation (mean)"].nlargest(1).items()))
    stack, type_ = attention.split(".")
    if family == "t5":
        sub = {"self_attn": "layer.0.SelfAttention", "cross_attn": "layer.1.EncDecAttention"}[type_]
        path = f"{stack}.block.{layer - 1}.{sub}.o"
    else:
        path = f"model.{stack}.layers.{layer - 1}.{'self_attn' if type_ == 'self_attn' else 'encoder_attn'}.out_proj"
    proj = dict(model.named_modules())[path]
    original, cut = proj.forward, slice((head - 1) * 8, head * 8)

    def averaged(x):
        x = x.clone()
        x[..., cut] = x[..., cut].mean(dim=1, keepdim=True)
        return original(x)

    try:
        proj.forward = averaged
        with torch.no_grad():
            after = torch.log_softmax(model(input_ids=source, decoder_input_ids=target).logits[0, 2].double(), -1)
    finally:
        proj.forward = original
    assert abs(float((before.exp() * (before - after)).sum()) - kl) < TOL
