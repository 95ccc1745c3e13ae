"""Our BERT and Llama switches compute what `transformers` computes: tiny random models built by `transformers`
from a seeded config, their state dicts loaded into ours through the loaders' own mapping, then logits, hidden
states and every head's attention weights compared (eager attention, `output_attentions=True`). No download."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from inference.pretrained.mapping import (  # noqa: E402
    BERT_NAMES,
    BERT_UNUSED,
    LLAMA_NAMES,
    LLAMA_UNUSED,
    MappingError,
    bert_config,
    fill_model,
    llama_config,
    rename,
)

TOL = {"atol": 1e-4, "rtol": 1e-4}
BERT_SPECIALS = {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
LLAMA_SPECIALS = {"pad_id": 3, "unk_id": 0, "bos_id": 1, "eos_id": 2}


def tiny_bert_config(**extra) -> transformers.BertConfig:
    """The tiny BERT both parity models share: 2 layers × 4 heads, d_model 48, eager attention (weights recorded)."""
    return transformers.BertConfig(
        vocab_size=97,
        hidden_size=48,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=80,
        max_position_embeddings=40,
        attn_implementation="eager",
        **extra,
    )


def nudged(model: torch.nn.Module, *names: str) -> torch.nn.Module:
    """transformers initialises LayerNorms (and biases) to (1, 0): nudge the parameters whose names contain or end
    with `names`, seeded, so that a mapping that drops them shows."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if any(n in name for n in names):
                param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


def tiny_bert() -> transformers.BertModel:
    torch.manual_seed(0)
    return nudged(transformers.BertModel(tiny_bert_config(layer_norm_eps=1e-12)).eval(), "LayerNorm")


def tiny_bert_mlm() -> transformers.BertForMaskedLM:
    torch.manual_seed(0)
    return nudged(transformers.BertForMaskedLM(tiny_bert_config()).eval(), "LayerNorm", "predictions.bias")


def tiny_llama(tie: bool = False, rope_theta: float = 10000.0) -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=101,
        hidden_size=48,
        num_attention_heads=6,
        num_key_value_heads=2,
        num_hidden_layers=3,
        intermediate_size=72,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
        rope_parameters={"rope_theta": rope_theta, "rope_type": "default"},
        attn_implementation="eager",
    )
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.add_(torch.randn_like(param) * 0.2)
    return model


def ids(vocab: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(4, vocab, (2, length), generator=torch.Generator().manual_seed(seed))


def ours_bert(reference: transformers.BertModel):
    config = bert_config(reference.config.to_dict(), BERT_SPECIALS)
    return fill_model(config, rename(reference.state_dict(), BERT_NAMES, BERT_UNUSED, "bert"), "bert")


def ours_llama(reference: transformers.LlamaForCausalLM):
    config = llama_config(reference.config.to_dict(), LLAMA_SPECIALS)
    return fill_model(config, rename(reference.state_dict(), LLAMA_NAMES, LLAMA_UNUSED, "llama"), "llama")


@torch.no_grad()
def test_bert_hidden_states_and_every_heads_weights_equal_transformers() -> None:
    reference = tiny_bert()
    model = ours_bert(reference)
    x = ids(97, 11)
    expected = reference(x, output_attentions=True)
    logits, trace = model(x)
    # no masked-LM head: the logits are the output vectors against the (tied) token embeddings
    embeddings = reference.embeddings.word_embeddings.weight
    torch.testing.assert_close(logits, expected.last_hidden_state @ embeddings.T, **TOL)
    names = [f"encoder.layers.{i}.self_attn" for i in range(2)]
    assert list(trace.attention) == names
    for name, weights in zip(names, expected.attentions, strict=True):
        torch.testing.assert_close(trace.attention[name].weights, weights, **TOL)
    assert trace.attention[names[0]].mask.all()  # bidirectional: every token sees every token


@torch.no_grad()
def test_bert_hidden_states_are_recovered_from_the_logits() -> None:
    # the logits are h Eᵀ; E (97 × 48) has full column rank, so equal logits mean equal hidden states
    reference = tiny_bert()
    model = ours_bert(reference)
    x = ids(97, 7, seed=3)
    logits, _ = model(x)
    embeddings = reference.embeddings.word_embeddings.weight
    hidden = torch.linalg.lstsq(embeddings.expand(2, -1, -1), logits.transpose(1, 2)).solution.transpose(1, 2)
    torch.testing.assert_close(hidden, reference(x).last_hidden_state, **TOL)


@pytest.mark.parametrize("tie", [False, True])
@torch.no_grad()
def test_llama_logits_and_every_query_heads_weights_equal_transformers(tie: bool) -> None:
    reference = tiny_llama(tie=tie, rope_theta=500.0)
    model = ours_llama(reference)
    assert model.config.kv_heads == 2 and model.config.n_heads == 6
    x = ids(101, 13)
    expected = reference(x, output_attentions=True)
    logits, trace = model(x)
    torch.testing.assert_close(logits, expected.logits, **TOL)
    names = [f"decoder.layers.{i}.self_attn" for i in range(3)]
    assert list(trace.attention) == names
    for name, weights in zip(names, expected.attentions, strict=True):
        assert trace.attention[name].weights.shape == (2, 6, 13, 13)  # every query head, not the 2 kv heads
        torch.testing.assert_close(trace.attention[name].weights, weights, **TOL)


@torch.no_grad()
def test_llama_query_heads_of_one_group_read_the_same_key_value_head() -> None:
    model = ours_llama(tiny_llama())
    _, trace = model(ids(101, 5))
    keys = trace.attention["decoder.layers.0.self_attn"].keys  # (B, H, T, d_head)
    assert [model.config.kv_head(h) for h in range(6)] == [0, 0, 0, 1, 1, 1]
    for head in range(6):  # heads 0-2 read key/value head 0, heads 3-5 head 1
        assert torch.equal(keys[:, head], keys[:, 3 * model.config.kv_head(head)]), head
    assert not torch.equal(keys[:, 0], keys[:, 3])


@torch.no_grad()
def test_llama_decoding_with_the_cache_equals_the_whole_sequence() -> None:
    # rotary positions continue after the past's tokens: the last token's logits are the same either way
    model = ours_llama(tiny_llama())
    x = ids(101, 9)
    full, _ = model(x)
    _, past = model(x[:, :6])
    step, _ = model(x[:, 6:], past=past)
    torch.testing.assert_close(step, full[:, 6:], atol=1e-5, rtol=1e-5)


def test_a_tensor_of_the_wrong_shape_is_named() -> None:
    reference = tiny_llama()
    tensors = rename(reference.state_dict(), LLAMA_NAMES, LLAMA_UNUSED, "llama")
    tensors["decoder.layers.1.self_attn.w_k.weight"] = tensors["decoder.layers.1.self_attn.w_k.weight"][:8]
    with pytest.raises(MappingError, match=r"decoder\.layers\.1\.self_attn\.w_k\.weight.*shape \(8, 48\)"):
        fill_model(llama_config(reference.config.to_dict(), LLAMA_SPECIALS), tensors, "llama")


def test_a_missing_tensor_and_an_unknown_name_are_named() -> None:
    reference = tiny_bert()
    state = dict(reference.state_dict())
    del state["encoder.layer.1.output.LayerNorm.bias"]
    tensors = rename(state, BERT_NAMES, BERT_UNUSED, "bert")
    with pytest.raises(MappingError, match=r"encoder\.layers\.1\.sublayer\.1\.norm\.bias.*missing"):
        fill_model(bert_config(reference.config.to_dict(), BERT_SPECIALS), tensors, "bert")
    state["encoder.layer.0.crossattention.query.weight"] = torch.zeros(1)
    with pytest.raises(MappingError, match=r"crossattention"):
        rename(state, BERT_NAMES, BERT_UNUSED, "bert")


def test_an_unsupported_config_field_is_named() -> None:
    config = tiny_llama().config.to_dict() | {"hidden_act": "gelu"}
    with pytest.raises(MappingError, match="hidden_act"):
        llama_config(config, LLAMA_SPECIALS)
    config = tiny_bert().config.to_dict() | {"position_embedding_type": "relative_key"}
    with pytest.raises(MappingError, match="position_embedding_type"):
        bert_config(config, BERT_SPECIALS)


@torch.no_grad()
def test_a_bert_with_its_masked_lm_head_gives_transformers_fill_mask_logits() -> None:
    reference = tiny_bert_mlm()
    config = bert_config(reference.config.to_dict(), BERT_SPECIALS, mlm_head=True)
    model = fill_model(config, rename(reference.state_dict(), BERT_NAMES, BERT_UNUSED, "bert"), "bert")
    x = ids(97, 9)
    expected = reference(x, output_attentions=True)
    logits, trace = model(x)
    torch.testing.assert_close(logits, expected.logits, **TOL)
    for i, weights in enumerate(expected.attentions):
        torch.testing.assert_close(trace.attention[f"encoder.layers.{i}.self_attn"].weights, weights, **TOL)
