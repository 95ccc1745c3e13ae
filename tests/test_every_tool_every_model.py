"""Every tool takes every model: rank_heads, agreement, fork, forced, head_stats(model=) and detect_heads take a
`transformers` object with its tokenizer (or a TransformerLens bridge of one) as they take a loaded checkpoint,
giving what the same model mapped onto ours gives, and every one takes `device=` — "cpu" honoured, a device that is
not here one line."""

from __future__ import annotations

import pandas.testing as pd_testing
import pytest
import torch

import atlas
from inference.pretrained.objects import from_transformers

transformers = pytest.importorskip("transformers")
from test_any_model import OTHER, TEXT, tiny_gpt2, word_tokenizer  # noqa: E402

TOOLS = {
    "rank_heads": lambda m, **kw: atlas.rank_heads(m, TEXT, **kw),
    "agreement": lambda m, **kw: atlas.agreement(m, TEXT, corrupted=OTHER, **kw),
    "fork": lambda m, **kw: atlas.fork(m, TEXT, step=1, max_tokens=3, **kw).table,
    "forced": lambda m, **kw: atlas.forced(m, TEXT, "mat . the", **kw),
    "head_stats": lambda m, **kw: atlas.head_stats(atlas.analyze(from_transformers(*PAIR), TEXT), m, **kw),
    "detect_heads": lambda m, **kw: atlas.detect_heads(m, [TEXT, OTHER], "previous token", **kw),
}
PAIR = (tiny_gpt2(), word_tokenizer())


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_transformers_object_gives_what_its_mapped_checkpoint_gives(tool):
    model, tokenizer = PAIR
    mapped = from_transformers(model, tokenizer)
    pd_testing.assert_frame_equal(TOOLS[tool](model, tokenizer=tokenizer), TOOLS[tool](mapped), atol=1e-6)


def test_forced_on_a_transformers_object_gives_the_libraries_probabilities():
    model, tokenizer = PAIR
    table = atlas.forced(model, TEXT, "mat . the", tokenizer=tokenizer)
    prompt = [model.config.bos_token_id, *tokenizer(TEXT)["input_ids"]]
    reference = tokenizer("mat . the")["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + reference])).logits[0].double()
    probs = torch.softmax(logits, -1)
    for step, token in enumerate(reference):
        assert abs(table["probability"][step] - float(probs[len(prompt) - 1 + step, token])) < 1e-5


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_device_cpu_is_honoured_and_a_bad_one_is_one_line(tool):
    model, tokenizer = PAIR
    pd_testing.assert_frame_equal(
        TOOLS[tool](model, tokenizer=tokenizer, device="cpu"), TOOLS[tool](model, tokenizer=tokenizer), atol=1e-6
    )
    assert next(model.parameters()).device.type == "cpu"  # the caller's model stays where it was
    with pytest.raises(ValueError, match=r"^device must be \"cpu\" or \"cuda\"") as caught:
        TOOLS[tool](model, tokenizer=tokenizer, device="no such device")
    assert "\n" not in str(caught.value)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"torch finds no CUDA GPU here") as caught:
            TOOLS[tool](model, tokenizer=tokenizer, device="cuda")
        assert "\n" not in str(caught.value)


def test_a_model_no_tool_maps_says_what_does():
    bert = transformers.BertModel(
        transformers.BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2)
    )
    with pytest.raises(ValueError, match=r"is not one this app maps onto its own") as caught:
        atlas.rank_heads(bert, TEXT, tokenizer=word_tokenizer())
    assert "\n" not in str(caught.value)
    with pytest.raises(TypeError, match=r"save_pretrained\(folder\) is read by atlas.load\(folder\)"):
        atlas.fork(object(), TEXT, step=1)
    from seq2seq_models import tiny

    with pytest.raises(ValueError, match=r"^score_parts runs a model this app maps") as caught:
        atlas.score_parts(tiny("bart"), TEXT, layer=1, head=1, query=1, key=1, tokenizer=word_tokenizer())
    assert "\n" not in str(caught.value)


@pytest.mark.slow  # TransformerLens takes seconds to import
def test_a_transformer_lens_bridge_goes_where_its_model_goes():
    bridge_module = pytest.importorskip("transformer_lens.model_bridge")
    model, tokenizer = PAIR
    bridge = bridge_module.TransformerBridge.boot_transformers("gpt2", hf_model=model, tokenizer=tokenizer)
    for tool in ("rank_heads", "fork", "forced", "detect_heads"):
        pd_testing.assert_frame_equal(TOOLS[tool](bridge), TOOLS[tool](model, tokenizer=tokenizer), atol=1e-6)
