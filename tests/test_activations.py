"""The residual stream and the feed-forward layers a forward pass records on request (Trace.activations): the exact
names, keyed by module path, and values that are the model's own (each layer's output is the next one's input; the
recorded hidden layer through W2 is the sub-layer's output), for the paper's models and the published switches."""

from __future__ import annotations

import pytest
import torch

from model.config import ModelConfig, Published
from model.factory import build_model

SIZES = {"vocab_size": 40, "d_model": 32, "n_heads": 4, "d_ff": 48, "max_len": 24, "dropout": 0.1}
VARIANTS = {"post-sinusoidal": {}, "pre-learned": {"norm": "pre", "positional": "learned"}}
LLAMA = Published(n_kv_heads=2, norm_type="rms", activation="swiglu", bias=False, embed_scale=False)
BERT = Published(activation="gelu", embed_scale=False, embed_norm=True, n_token_types=2, mlm_head=True)


def names_of_layer(stack: str, i: int, cross: bool = False) -> list[str]:
    name = f"{stack}.layers.{i}"
    attention = [f"{name}.resid_pre", f"{name}.self_attn.out", f"{name}.resid_mid"]
    if cross:
        attention += [f"{name}.cross_attn.out", f"{name}.resid_mid_cross"]
    return attention + [f"{name}.feed_forward.hidden", f"{name}.feed_forward.out", f"{name}.resid_post"]


def names_of_stack(stack: str, n_layers: int, cross: bool = False) -> list[str]:
    layers = [n for i in range(n_layers) for n in names_of_layer(stack, i, cross)]
    return [f"{stack}.embed", *layers, f"{stack}.output"]


def model_of(kind: str, seed: int = 0, **fields):
    layers = {
        "n_encoder_layers": 2 if kind != "decoder-only" else 0,
        "n_decoder_layers": 3 if kind != "encoder-only" else 0,
    }
    torch.manual_seed(seed)
    return build_model(ModelConfig(kind=kind, **SIZES, **layers, **fields)).eval()


def run(model, ids: torch.Tensor, **kwargs):
    with torch.no_grad():
        if model.config.has_cross_attention:
            return model(ids, ids[:, :5], **kwargs)
        return model(ids, **kwargs)


def layers_of(model):
    """(stack name, its layers) of every stack the model has."""
    return [(s, getattr(model, s).layers) for s in ("encoder", "decoder") if getattr(model, s) is not None]


@pytest.fixture
def ids() -> torch.Tensor:
    ids = torch.randint(4, 40, (2, 7), generator=torch.Generator().manual_seed(1))
    ids[1, 5:] = 0  # a padded row
    return ids


def test_the_recorded_names_are_exactly_the_stacks_layers_and_points_in_computation_order(ids) -> None:
    _, trace = run(model_of("encoder-decoder"), ids, activations=True)
    assert list(trace.activations) == names_of_stack("encoder", 2) + names_of_stack("decoder", 3, cross=True)
    _, trace = run(model_of("decoder-only"), ids, activations=True)
    assert list(trace.activations) == names_of_stack("decoder", 3)
    _, trace = run(model_of("encoder-only", published=BERT, positional="learned"), ids, activations=True)
    assert list(trace.activations) == names_of_stack("encoder", 2)


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_nothing_is_recorded_unless_asked_and_asking_changes_no_output(kind, ids) -> None:
    model = model_of(kind)
    logits, trace = run(model, ids)
    assert trace.activations == {}
    recorded, traced = run(model, ids, activations=True)
    assert torch.equal(recorded, logits) and list(traced.attention) == list(trace.attention)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_each_layers_output_is_the_next_layers_input(kind, variant, ids) -> None:
    model = model_of(kind, **VARIANTS[variant])
    logits, trace = run(model, ids, activations=True)
    acts = trace.activations
    for stack, layers in layers_of(model):
        for i in range(len(layers) - 1):
            assert torch.equal(acts[f"{stack}.layers.{i}.resid_post"], acts[f"{stack}.layers.{i + 1}.resid_pre"])
        last = acts[f"{stack}.layers.{len(layers) - 1}.resid_post"]
        torch.testing.assert_close(acts[f"{stack}.output"], getattr(model, stack).norm(last))
        # the first layer reads the embeddings (· √d_model) plus the positions the trace holds
        first = acts[f"{stack}.embed"] + trace.positional_encoding[stack]
        torch.testing.assert_close(acts[f"{stack}.layers.0.resid_pre"], first)
    torch.testing.assert_close(model.generator(acts["decoder.output"]), logits)
    if kind == "encoder-decoder":  # the decoder's cross-attention reads the encoder's output
        keys = trace.attention["decoder.layers.0.cross_attn"].keys
        w_k = model.decoder.layers[0].cross_attn.w_k(acts["encoder.output"])
        torch.testing.assert_close(keys, w_k.view(*w_k.shape[:2], 4, 8).transpose(1, 2))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_the_hidden_layer_through_w2_is_the_feed_forward_sublayers_output(kind, variant, ids) -> None:
    model = model_of(kind, **VARIANTS[variant])
    _, trace = run(model, ids, activations=True)
    acts = trace.activations
    for stack, layers in layers_of(model):
        for i, layer in enumerate(layers):
            name = f"{stack}.layers.{i}"
            before = acts.get(f"{name}.resid_mid_cross", acts[f"{name}.resid_mid"])  # the feed-forward's input
            hidden = acts[f"{name}.feed_forward.hidden"]
            assert hidden.shape == (*before.shape[:2], model.config.d_ff) and (hidden >= 0).all()  # after ReLU
            out = layer.feed_forward.w_2(hidden)
            torch.testing.assert_close(out, acts[f"{name}.feed_forward.out"])
            if model.config.norm == "pre":  # x + FFN(LayerNorm(x))
                torch.testing.assert_close(acts[f"{name}.resid_post"] - before, out, atol=1e-5, rtol=1e-5)
                w_1 = layer.feed_forward.w_1(layer.sublayer[-1].norm(before))
            else:  # LayerNorm(x + FFN(x))
                torch.testing.assert_close(acts[f"{name}.resid_post"], layer.sublayer[-1].norm(before + out))
                w_1 = layer.feed_forward.w_1(before)
            torch.testing.assert_close(hidden, torch.relu(w_1))


def test_a_published_models_hidden_layer_is_its_own_gated_unit(ids) -> None:
    model = model_of("decoder-only", published=LLAMA, positional="rotary", norm="pre")
    _, trace = run(model, ids, activations=True)
    for i, layer in enumerate(model.decoder.layers):
        acts = {k.removeprefix(f"decoder.layers.{i}."): t for k, t in trace.activations.items()}
        torch.testing.assert_close(layer.feed_forward.w_2(acts["feed_forward.hidden"]), acts["feed_forward.out"])
        torch.testing.assert_close(acts["resid_post"] - acts["resid_mid"], acts["feed_forward.out"])
        torch.testing.assert_close(acts["resid_mid"] - acts["resid_pre"], acts["self_attn.out"])


def test_a_continued_pass_records_its_new_positions_and_a_beam_keeps_its_rows(ids) -> None:
    model = model_of("decoder-only", **VARIANTS["pre-learned"])
    _, whole = run(model, ids, activations=True)
    with torch.no_grad():
        _, past = model(ids[:, :4])
        _, step = model(ids[:, 4:], past=past, activations=True)
    assert list(step.activations) == names_of_stack("decoder", 3)
    for name, tensor in step.activations.items():
        torch.testing.assert_close(tensor, whole.activations[name][:, 4:], atol=1e-5, rtol=1e-5)
    kept = whole.select(torch.tensor([1]))
    assert all(torch.equal(kept.activations[n], t[1:]) for n, t in whole.activations.items())
    assert whole.encoder_part().activations == {}
