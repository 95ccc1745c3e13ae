"""`atlas.analyze` runs models of other libraries: a Hugging Face `transformers` model of an architecture not mapped
onto ours (a GPT-NeoX here; GPT-2 and Llama are mapped: tests/test_any_model.py) with its tokenizer (eager attention
for the call, its own restored after) and a TransformerLens bridge. Each head's weights equal the library's own, on
tiny random models built here, with no download."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import atlas

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

WORDS = ["<unk>", "the", "cat", "sat", "on", "mat", "."]
TEXT = "the cat sat on the mat ."
TOL = 1e-5


def word_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer over WORDS, split at spaces: a real `transformers` tokenizer, built offline."""
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


@pytest.fixture(scope="module")
def unmapped() -> transformers.OPTForCausalLM:
    """An OPT, 2 layers × 2 heads, random and seeded, with transformers' default attention (sdpa: no weights
    returned). Not mapped onto ours (GPT-NeoX now is), so run by its own forward."""
    torch.manual_seed(0)
    config = transformers.OPTConfig(
        num_hidden_layers=2,
        num_attention_heads=2,
        hidden_size=32,
        word_embed_proj_dim=32,
        ffn_dim=64,
        max_position_embeddings=16,
        vocab_size=len(WORDS),
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return transformers.OPTForCausalLM(config).eval()


def own_attentions(model, tokenizer, text: str) -> list[np.ndarray]:
    """The library's own weights: the same model run eagerly with output_attentions=True, [heads, queries, keys]."""
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            ids = [model.config.bos_token_id, *tokenizer(text)["input_ids"]]  # the one rule: bos, then the text
            outputs = model(torch.tensor([ids]), output_attentions=True)
    finally:
        model.set_attn_implementation(before)
    return [a[0].numpy() for a in outputs.attentions]


def test_an_unmapped_huggingface_models_every_head_equals_its_own_attention(unmapped) -> None:
    tokenizer = word_tokenizer()
    assert unmapped.config._attn_implementation == "sdpa"
    analysis = atlas.analyze(unmapped, TEXT, tokenizer=tokenizer)
    assert unmapped.config._attn_implementation == "sdpa"  # switched back after the call
    assert analysis.kind == "decoder-only" and list(analysis.target_pieces) == ["<unk>", *TEXT.split()]
    own = own_attentions(unmapped, tokenizer, TEXT)
    layers = analysis.layers("decoder.self_attn")
    assert len(layers) == len(own) == 2
    for layer, expected in zip(layers, own, strict=True):
        np.testing.assert_allclose(analysis.sublayer("decoder.self_attn", layer).weights, expected, atol=TOL, rtol=0)


def test_a_model_that_returns_no_weights_names_eager_attention(unmapped, monkeypatch) -> None:
    monkeypatch.setattr(unmapped, "set_attn_implementation", lambda implementation: None)  # stays sdpa: no weights
    with pytest.raises(
        atlas.TraceError, match="returned no attention weights: load it with attn_implementation='eager'"
    ):
        atlas.analyze(unmapped, TEXT, tokenizer=word_tokenizer())


def test_a_huggingface_model_without_its_tokenizer_is_told_to_pass_one(unmapped) -> None:
    with pytest.raises(ValueError, match="needs its tokenizer: atlas.analyze\\(model, text, tokenizer="):
        atlas.analyze(unmapped, TEXT)
    with pytest.raises(TypeError, match="a Hugging Face model .*, not str"):
        atlas.analyze("neox", TEXT)  # type: ignore[arg-type]


@pytest.mark.slow  # TransformerLens takes about 7 s to import
def test_a_transformer_lens_bridges_every_head_equals_its_cache() -> None:
    from transformer_lens.model_bridge.sources import boot_native

    config = {"n_layers": 2, "n_heads": 2, "d_model": 32, "d_head": 16, "d_vocab": len(WORDS), "n_ctx": 16}
    bridge = boot_native(config | {"act_fn": "gelu", "seed": 0}, tokenizer=word_tokenizer())
    analysis = atlas.analyze(bridge, TEXT)
    _, cache = bridge.run_with_cache(TEXT)
    assert list(analysis.target_pieces) == bridge.to_str_tokens(TEXT)
    layers = analysis.layers("decoder.self_attn")
    assert len(layers) == 2
    for i, layer in enumerate(layers):
        expected = cache[f"blocks.{i}.attn.hook_pattern"][0].detach().numpy()
        np.testing.assert_allclose(analysis.sublayer("decoder.self_attn", layer).weights, expected, atol=TOL, rtol=0)
