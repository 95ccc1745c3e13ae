"""The Lesson's embedding, feed-forward and residual steps on a GPT-2 folder (a tiny random GPT-2 saved by
`transformers`, as tests/test_pretrained_gpt2.py builds it): each draws the model's own recorded activations, with
GELU and pre-norm LayerNorm, and none of them asks for another model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
import test_pretrained_gpt2 as gpt2
from plotly_data import decode_typed_array

from analysis.lesson import stream
from inference.checkpoint import load_checkpoint

TEXT = "the cat sat on the mat"
published = gpt2.published  # the fixture: a tiny random GPT-2 folder saved by transformers
STEPS = {"embeddings": "lesson_embeddings", "feed-forward": "lesson_ffn", "residual-layernorm": "lesson_residual"}


@pytest.fixture
def recorded(published) -> dict[str, np.ndarray]:
    """The GPT-2's activations on TEXT (after its <|endoftext|>), from a forward pass run here."""
    ckpt = load_checkpoint(published["lm"])
    ids = torch.tensor([[ckpt.config.bos_id, *ckpt.tokenizer.encode(TEXT)]])
    with torch.inference_mode():
        _, trace = ckpt.model(ids, activations=True)
    return {name: t[0].numpy() for name, t in trace.activations.items()}


def test_the_stream_of_a_gpt2_folder_is_its_recorded_activations(published, recorded) -> None:
    result = stream(load_checkpoint(published["lm"]), TEXT)
    assert result.stack == "decoder" and result.pre_norm and result.norms.shape == (2, 2, 3)
    np.testing.assert_allclose(result.embedded, recorded["decoder.embed"], atol=1e-5)
    np.testing.assert_allclose(result.hidden, recorded["decoder.layers.0.feed_forward.hidden"], atol=1e-5)
    assert (result.hidden < 0).any()  # GELU, not a ReLU: small negative values pass
    np.testing.assert_allclose(result.output, recorded["decoder.output"], atol=1e-5)


@pytest.mark.parametrize("slug", list(STEPS))
def test_the_layer_steps_draw_a_gpt2_folder(published, recorded, monkeypatch, slug: str) -> None:
    at = gpt2.gpt2_app(published, monkeypatch)
    at.switch_page("views/lesson.py").run()
    at.selectbox(key="lesson_jump").select(slug).run()
    at.radio(key="lesson_source").set_value("yours").run()
    assert not gpt2.problems(at), gpt2.problems(at)
    assert not at.info, [i.value for i in at.info]  # no "this step needs another model"
    assert any(c.value.startswith("Needs any model: gpt2-lm") for c in at.caption)
    drawn = {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    fig = drawn[STEPS[slug]]
    if slug == "embeddings":
        z = decode_typed_array(fig["data"][0]["z"])
        np.testing.assert_allclose(z, recorded["decoder.embed"], atol=1e-5)
        assert fig["layout"]["title"]["text"].startswith("Token embeddings")
    elif slug == "feed-forward":
        units = [u - 1 for _, u in fig["data"][0]["customdata"][0]]  # hover counts units from 1
        z = decode_typed_array(fig["data"][0]["z"])
        np.testing.assert_allclose(z, recorded["decoder.layers.0.feed_forward.hidden"][:, units], atol=1e-5)
        assert "GELU" in fig["layout"]["title"]["text"]
    else:
        lengths = np.linalg.norm(recorded["decoder.layers.1.resid_post"], axis=-1).mean()
        assert decode_typed_array(fig["data"][2]["y"])[-1] == pytest.approx(
            lengths, rel=1e-4
        )  # the last layer's stream going out
        assert "x + Sublayer(LayerNorm(x))" in fig["data"][2]["name"]
