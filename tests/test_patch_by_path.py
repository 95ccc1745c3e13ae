"""Any recorded activation by its module path: `atlas.activations` reads it (our trace's names; a `transformers`
encoder-decoder's own module paths), and `patch_scores(..., what=path)` patches it at each head or position. Each
is checked against a computation of our own: the module's forward swapped in plain torch, or the grid the whole
"heads"/"residual" patching gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import atlas
from model.forward import forward

transformers = pytest.importorskip("transformers")
from seq2seq_models import OTHER, SOURCE, TARGET, tiny, word_tokenizer  # noqa: E402

CLEAN, CORRUPTED = "The cat sat on the mat.", "The dog sat on the mat."
TOL = 1e-5
ASKED = {"target": TARGET, "position": 3, "answer": "Katze", "versus": "Hund"}


@pytest.fixture(scope="module")
def lm():
    return atlas.load("lm-english")


def test_our_activations_are_the_traces_by_module_path(lm):
    found = atlas.activations(lm, CLEAN)
    ids = torch.tensor([atlas.analyze(lm, CLEAN).target_ids])
    with torch.no_grad():
        _, trace = forward(lm.model, ids, record=False, activations=True)
        embedded = lm.model.embed(ids)[0]
    assert list(found) == list(trace.activations)
    np.testing.assert_allclose(found["decoder.embed"], embedded.numpy(), atol=TOL)
    np.testing.assert_array_equal(found["decoder.layers.0.resid_post"], found["decoder.layers.1.resid_pre"])
    one = atlas.activations(lm, CLEAN, names=["decoder.layers.1.feed_forward.hidden"])
    assert (
        list(one) == ["decoder.layers.1.feed_forward.hidden"]
        and one["decoder.layers.1.feed_forward.hidden"].shape[1] == lm.config.d_ff
    )


def test_their_activations_are_the_modules_outputs():
    model, tokenizer = tiny("bart"), word_tokenizer()
    path = "model.encoder.layers.0.fc2"
    fc2, kept = dict(model.named_modules())[path], {}
    original = fc2.forward
    fc2.forward = lambda x: kept.setdefault("out", original(x))
    try:
        source = tokenizer(SOURCE, return_tensors="pt")["input_ids"]
        target = torch.tensor([[model.config.decoder_start_token_id, *tokenizer(text_target=TARGET)["input_ids"]]])
        with torch.no_grad():
            model(input_ids=source, decoder_input_ids=target)
    finally:
        fc2.forward = original
    found = atlas.activations(model, SOURCE, names=[path], target=TARGET, tokenizer=tokenizer)
    np.testing.assert_allclose(found[path], kept["out"][0].numpy(), atol=TOL)
    assert set(atlas.activations(model, SOURCE, target=TARGET, tokenizer=tokenizer)) == {
        f"model.{stack}.layers.{i}" for stack in ("encoder", "decoder") for i in range(2)
    }


def test_our_paths_patch_as_the_whole_grid_does(lm):
    residual = atlas.patch_scores(lm, CLEAN, CORRUPTED, what="residual")
    one = atlas.patch_scores(lm, CLEAN, CORRUPTED, what="decoder.layers.1.resid_pre")
    grid = residual[residual["layer"] == 2].set_index("position")["restored"]
    np.testing.assert_allclose(one.set_index("position")["restored"].sort_index(), grid.sort_index(), atol=TOL)
    after = atlas.patch_scores(lm, CLEAN, CORRUPTED, what="decoder.layers.0.resid_post")
    np.testing.assert_allclose(after["restored"], one["restored"], atol=TOL)
    heads = atlas.patch_scores(lm, CLEAN, CORRUPTED)
    sublayer = atlas.patch_scores(lm, CLEAN, CORRUPTED, what="decoder.layers.1.self_attn").set_index("head")
    layer = heads[heads["layer"] == 2].set_index("head")["restored"]
    np.testing.assert_allclose(sublayer["restored"].sort_index(), layer.sort_index(), atol=TOL)
    assert atlas.patch(lm, CLEAN, CORRUPTED, what="decoder.layers.1.self_attn").data


def test_a_translators_layer_patches_as_its_whole_grid_does():
    translator = atlas.load("translate-en-de")
    residual = atlas.patch_scores(translator, CLEAN, CORRUPTED, what="residual")
    one = atlas.patch_scores(translator, CLEAN, CORRUPTED, what="encoder.layers.1.resid_pre")
    grid = residual[(residual["stack"] == "encoder") & (residual["layer"] == 2)].set_index("position")
    np.testing.assert_allclose(
        one.set_index("position")["restored"].sort_index(), grid["restored"].sort_index(), atol=TOL
    )


def test_a_library_path_patches_as_a_swapped_forward_does():
    model, tokenizer = tiny("bart"), word_tokenizer()
    path = "model.encoder.layers.0.fc2"
    table = atlas.patch_scores(model, SOURCE, OTHER, what=path, tokenizer=tokenizer, **ASKED)
    sources = [tokenizer(t, return_tensors="pt")["input_ids"] for t in (SOURCE, OTHER)]
    target = torch.tensor([[model.config.decoder_start_token_id, *tokenizer(text_target=TARGET)["input_ids"]]])
    answer, versus = tokenizer.convert_tokens_to_ids(["Katze", "Hund"])
    fc2 = dict(model.named_modules())[path]
    original, kept = fc2.forward, {}
    span = table.attrs["clean"] - table.attrs["corrupted"]
    for _, row in table.iterrows():
        p = row["position"] - 1

        def swap(x, p=p):
            out = original(x).clone()
            out[:, p] = kept["clean"][:, p]
            return out

        try:
            with torch.no_grad():
                fc2.forward = lambda x: kept.setdefault("clean", original(x))
                model(input_ids=sources[0], decoder_input_ids=target)
                fc2.forward = swap
                logits = model(input_ids=sources[1], decoder_input_ids=target).logits
        finally:
            fc2.forward = original
        own = float(logits[0, 2, answer] - logits[0, 2, versus])
        assert abs((own - table.attrs["corrupted"]) / span - row["restored"]) < TOL
    assert atlas.patch(model, SOURCE, OTHER, what=path, tokenizer=tokenizer, **ASKED).data


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("nothing", r"^what is 'heads', 'residual' or a module path"),
        ("decoder.layers.9.resid_pre", r"^lm-english has no 'decoder.layers.9.resid_pre' to patch"),
        ("decoder.layers.5.resid_post", r"^lm-english has no 'decoder.layers.5.resid_post' to patch"),  # the last layer
    ],
)
def test_a_path_that_cannot_be_patched_is_one_line(lm, what, message):
    with pytest.raises(ValueError, match=message) as caught:
        atlas.patch_scores(lm, CLEAN, CORRUPTED, what=what)
    assert "\n" not in str(caught.value)


def test_a_name_a_pass_does_not_record_is_one_line(lm):
    with pytest.raises(ValueError, match=r"^lm-english records no 'nope'"):
        atlas.activations(lm, CLEAN, names=["nope"])
    with pytest.raises(ValueError, match=r"^BartForConditionalGeneration has no module 'model.nope'"):
        atlas.patch_scores(tiny("bart"), SOURCE, OTHER, what="model.nope", tokenizer=word_tokenizer(), **ASKED)
