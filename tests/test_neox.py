"""A GPT-NeoX (Pythia's architecture) mapped onto our variants: the fused per-head query_key_value, rotary positions
on a share of each head's features, and the parallel layer (model/components/parallel.py) compute the library's
own logits, from the object and from its saved folder."""

from __future__ import annotations

import pytest
import torch

import atlas
from inference.pretrained.mapping import MappingError, neox_config
from inference.pretrained.objects import from_transformers

transformers = pytest.importorskip("transformers")
from test_any_model import SPECIALS, TEXT, read_ids, tiny_neox, word_tokenizer  # noqa: E402

SPECIAL_IDS = {"pad_id": 3, "unk_id": 0, "bos_id": 1, "eos_id": 2}


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("rotary_pct", [0.25, 1.0])
def test_our_logits_equal_gpt_neoxs_for_the_object_and_its_folder(tmp_path, parallel, rotary_pct) -> None:
    model, tokenizer = tiny_neox(parallel, rotary_pct), word_tokenizer()
    ids = read_ids(model, tokenizer, TEXT)
    with torch.no_grad():
        expected = model(ids).logits[0]
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    for ckpt in (from_transformers(model, tokenizer), atlas.load(tmp_path)):
        assert ckpt.config.switches.parallel_residual is parallel
        assert ckpt.config.rotary_dims == int(ckpt.config.d_head * rotary_pct)
        with torch.no_grad():
            ours, _ = ckpt.model(ids)
        torch.testing.assert_close(ours[0, :, : expected.shape[-1]], expected, atol=1e-5, rtol=0)


def test_a_parallel_layers_stream_still_sums_layer_by_layer() -> None:
    """resid_post = resid_pre + self_attn.out + feed_forward.out, the feed-forward reading resid_pre, not resid_mid."""
    ckpt = from_transformers(tiny_neox(), word_tokenizer())
    _, trace = ckpt.model(read_ids(tiny_neox(), word_tokenizer(), TEXT), activations=True)
    acts, layer = trace.activations, ckpt.model.decoder.layers[1]
    name = "decoder.layers.1"
    pre = acts[f"{name}.resid_pre"]
    torch.testing.assert_close(
        acts[f"{name}.resid_post"], pre + acts[f"{name}.self_attn.out"] + acts[f"{name}.feed_forward.out"]
    )
    torch.testing.assert_close(
        acts[f"{name}.feed_forward.hidden"], layer.feed_forward.hidden(layer.sublayer[1].norm(pre))
    )


def test_a_rotary_share_that_turns_no_pair_of_features_is_one_line() -> None:
    config = {
        "model_type": "gpt_neox",
        "vocab_size": len(SPECIALS),
        "hidden_size": 32,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "intermediate_size": 8,
        "max_position_embeddings": 8,
        "rotary_pct": 0.05,
    }
    with pytest.raises(MappingError, match="rotary_fraction 0.05 of d_head 16 turns 0 features"):
        neox_config(config, SPECIAL_IDS)
    with pytest.raises(MappingError, match="hidden_act is 'relu'"):
        neox_config({**config, "rotary_pct": 0.25, "hidden_act": "relu"}, SPECIAL_IDS)
