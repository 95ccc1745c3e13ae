"""Attention rollout (analysis.rollout), its heatmap (viz.rollout) and its page (views/rollout.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from test_app import ED, LM, chart, errors, ok, z

from analysis.analyze import analyze
from analysis.record import Analysis
from analysis.rollout import analysis_rollout, cross_rollout, head_mean, rollout, with_residual
from inference.checkpoint import load_checkpoint
from viz.rollout import rollout_heatmap

ROLLOUT_PAGE = "views/rollout.py"


def stochastic(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random row-stochastic matrices of `shape` (rows over the last axis)."""
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])


def reference_rollout(layers: np.ndarray, residual: float) -> np.ndarray:
    """R = Ā_L · … · Ā_1 with explicit loops: Ā = (1 − r)A + rI, rows renormalised."""
    n_layers, n, _ = layers.shape
    result = [[float(i == j) for j in range(n)] for i in range(n)]
    for layer in range(n_layers):
        a_bar = [[(1 - residual) * layers[layer][i][j] + residual * (i == j) for j in range(n)] for i in range(n)]
        a_bar = [[v / sum(row) for v in row] for row in a_bar]
        result = [[sum(a_bar[i][k] * result[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    return np.array(result)


def reference_cross(self_layers: np.ndarray, cross_layers: np.ndarray, encoder: np.ndarray, r: float) -> np.ndarray:
    """The joint state over [decoder tokens | source tokens], updated sublayer by sublayer with explicit loops;
    the source part renormalised at the end."""
    n_layers, nt, ns = cross_layers.shape
    state = [[float(i == j) for j in range(nt)] + [0.0] * ns for i in range(nt)]
    for layer in range(n_layers):
        s = [[(1 - r) * self_layers[layer][i][j] + r * (i == j) for j in range(nt)] for i in range(nt)]
        s = [[v / sum(row) for v in row] for row in s]
        state = [[sum(s[i][k] * state[k][j] for k in range(nt)) for j in range(nt + ns)] for i in range(nt)]
        through = [
            [sum(cross_layers[layer][i][k] * encoder[k][j] for k in range(ns)) for j in range(ns)] for i in range(nt)
        ]
        state = [
            [r * state[i][j] + (1 - r) * (through[i][j - nt] if j >= nt else 0.0) for j in range(nt + ns)]
            for i in range(nt)
        ]
    source = np.array([row[nt:] for row in state])
    return source / source.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def analyses(tiny_checkpoints: dict[str, Path]) -> dict[str, Analysis]:
    texts = {"decoder-only": "The cat sat on the mat.", "encoder-decoder": "Where is the station?"}
    return {k: analyze(load_checkpoint(p), texts[k], max_tokens=6) for k, p in tiny_checkpoints.items()}


EVERY_STACK = [
    ("encoder-decoder", "encoder.self_attn"),
    ("encoder-decoder", "decoder.self_attn"),
    ("encoder-decoder", "decoder.cross_attn"),
    ("decoder-only", "decoder.self_attn"),
]


# the maths ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "attention"), EVERY_STACK)
@pytest.mark.parametrize("residual", [True, False])
def test_every_row_sums_to_one_in_every_layer(analyses, kind: str, attention: str, residual: bool) -> None:
    result = analysis_rollout(analyses[kind], attention, residual)
    assert result.maps.dtype == np.float32 and result.maps.min() >= 0.0
    np.testing.assert_allclose(result.maps.sum(axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("residual", [0.5, 0.0])
def test_rollout_is_the_hand_written_product_of_the_layers(residual: float) -> None:
    layers = stochastic(np.random.default_rng(3), 3, 5, 5)
    out = rollout(layers, residual)
    for n in range(1, 4):  # every cumulative map: layers 1..n
        np.testing.assert_allclose(out[n - 1], reference_rollout(layers[:n], residual), atol=1e-12)


@pytest.mark.parametrize("residual", [0.5, 0.0])
def test_cross_rollout_is_the_hand_written_flow_through_both_sublayers(residual: float) -> None:
    rng = np.random.default_rng(4)
    self_layers, cross_layers = stochastic(rng, 3, 4, 4), stochastic(rng, 3, 4, 6)
    encoder = reference_rollout(stochastic(rng, 2, 6, 6), residual)
    out = cross_rollout(self_layers, cross_layers, encoder, residual)
    assert out.shape == (3, 4, 6)
    for n in range(1, 4):
        expected = reference_cross(self_layers[:n], cross_layers[:n], encoder, residual)
        np.testing.assert_allclose(out[n - 1], expected, atol=1e-12)
    np.testing.assert_allclose(out[0], cross_layers[0] @ encoder, atol=1e-12)  # one layer: its cross-attention


def test_one_layer_with_the_residual_is_half_attention_half_identity() -> None:
    a = stochastic(np.random.default_rng(5), 1, 6, 6)
    np.testing.assert_allclose(rollout(a)[0], 0.5 * a[0] + 0.5 * np.eye(6), atol=1e-12)
    np.testing.assert_allclose(rollout(a, 0.0)[0], a[0], atol=1e-12)


def test_identity_attention_rolls_out_to_the_identity() -> None:
    eye = np.broadcast_to(np.eye(7), (4, 7, 7))
    for residual in (0.5, 0.0):
        np.testing.assert_array_equal(rollout(eye, residual), eye)


def test_the_language_models_rollout_is_exactly_lower_triangular(analyses) -> None:
    for residual in (True, False):
        maps = analysis_rollout(analyses["decoder-only"], "decoder.self_attn", residual).maps
        assert np.all(np.triu(maps, 1) == 0.0)  # the future stays exactly 0, through every layer
        assert np.all(np.diagonal(maps, axis1=1, axis2=2) > 0)


def test_shapes_follow_the_stacks(analyses) -> None:
    ed, lm = analyses["encoder-decoder"], analyses["decoder-only"]
    ns, nt = len(ed.source_pieces), len(ed.target_pieces)
    assert analysis_rollout(ed, "encoder.self_attn").maps.shape == (2, ns, ns)
    assert analysis_rollout(ed, "decoder.self_attn").maps.shape == (2, nt, nt)
    cross = analysis_rollout(ed, "decoder.cross_attn")
    assert cross.maps.shape == (2, nt, ns) and cross.n_layers == 2
    assert (cross.query_pieces, cross.key_pieces) == (ed.target_pieces, ed.source_pieces)
    assert analysis_rollout(lm, "decoder.self_attn").maps.shape == (2, len(lm.target_pieces), len(lm.target_pieces))
    with pytest.raises(KeyError, match="no decoder.cross_attn"):
        analysis_rollout(lm, "decoder.cross_attn")
    with pytest.raises(ValueError, match="no rollout"):
        analysis_rollout(lm, "decoder.ffn")


def test_a_subset_of_heads_averages_only_those(analyses) -> None:
    lm = analyses["decoder-only"]
    weights = lm.stacked("decoder.self_attn")  # (L, H, T, T)
    one = analysis_rollout(lm, "decoder.self_attn", heads=[2])
    np.testing.assert_allclose(one.maps, rollout(weights[:, 2].astype(np.float64)), atol=1e-6)
    assert one.heads == (2,)
    np.testing.assert_allclose(head_mean(weights, [0, 3]), weights[:, [0, 3]].mean(axis=1), atol=1e-7)
    assert analysis_rollout(lm, "decoder.self_attn", heads=None).heads is None
    for bad in ([], [4], [-1]):
        with pytest.raises(ValueError, match="head"):
            head_mean(weights, bad)


def test_residual_needs_square_attention() -> None:
    with pytest.raises(ValueError, match="square"):
        with_residual(np.ones((2, 3, 4)) / 4)


# the heatmap --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 20, 60])  # numbers in cells; hover names pieces; hover names positions
def test_heatmap_shows_the_rollout_with_escaped_labels(n: int) -> None:
    maps = rollout(stochastic(np.random.default_rng(n), 2, n, n))[-1].astype(np.float32)
    pieces = [f"t{i}<b>" for i in range(n)]
    fig = rollout_heatmap(maps, pieces, pieces, "rollout <i>")
    spec = json.loads(pio.to_json(fig, validate=False))
    from plotly_data import decode_typed_array

    trace = spec["data"][0]
    np.testing.assert_array_equal(decode_typed_array(trace["z"]), maps)
    assert (trace["zmin"], trace["zmax"]) == (0.0, 1.0)
    assert "<b>" not in json.dumps(spec) and "<i>" not in json.dumps(spec)
    assert ("texttemplate" in trace) == (n <= 16)
    if n <= 16:
        assert trace["text"][1][2] == f"{maps[1, 2]:.2f}"
    # every cell's hover, any length: its own row and column, one category per token label
    assert trace["y"][1] == "2:t1&lt;b&gt;" and trace["x"][2] == "3:t2&lt;b&gt;"
    assert trace["hovertemplate"].startswith("output %{y} → input %{x}: ") and "customdata" not in trace
    assert spec["layout"]["xaxis"]["type"] == "category" and spec["layout"]["xaxis"]["tickvals"][0] == "1:t0&lt;b&gt;"
    # written without validation: validating the same dicts accepts every property and gives the same JSON
    assert json.loads(pio.to_json(go.Figure(fig.to_dict()))) == spec
    with pytest.raises(ValueError, match="does not match"):
        rollout_heatmap(maps[:-1], pieces, pieces)


def test_heatmap_leaves_masked_cells_blank() -> None:
    maps = rollout(np.tril(np.ones((2, 4, 4))) / np.arange(1, 5)[:, None])[-1]  # causal: uniform over the past
    trace = rollout_heatmap(maps, list("abcd"), list("abcd")).to_dict()["data"][0]
    assert trace["text"][0] == ["1.00", "", "", ""] and all(t for t in trace["text"][3])


# the page -----------------------------------------------------------------------------------------------------------


def test_rollout_page_draws_every_attention_of_an_encoder_decoder(app) -> None:
    at = app()
    at.selectbox(key="model").select(ED).run()
    at.switch_page(ROLLOUT_PAGE).run()
    ok(at)
    assert at.title[0].value == "Attention rollout"
    attentions = at.radio(key="attention")
    assert attentions.options == [
        "Encoder (source → source)",
        "Decoder self-attention (output → output)",
        "Decoder → source (through the encoder)",
    ]
    shapes = {}
    for attention in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"):
        at.radio(key="attention").set_value(attention).run()
        fig = chart(ok(at), "rollout_chart")
        maps = z(fig)
        shapes[attention] = maps.shape
        np.testing.assert_allclose(maps.sum(axis=1), 1.0, atol=1e-5)
        assert "Row i" in " ".join(c.value for c in at.caption)
    ns, nt = shapes["encoder.self_attn"][0], shapes["decoder.self_attn"][0]
    assert shapes["decoder.cross_attn"] == (nt, ns)
    assert any("from the source" in c.value for c in at.caption)  # the cross map says what its rows leave out


def test_rollout_page_on_a_language_model_follows_residual_layer_and_heads(app, good_dir: Path) -> None:
    at = app()
    at.switch_page(ROLLOUT_PAGE).run()
    ok(at)
    assert "attention" not in [r.key for r in at.radio]  # one attention: nothing to choose
    analysis = analyze(load_checkpoint(good_dir / LM), at.text_area(key="text").value)
    full = z(chart(at, "rollout_chart"))
    np.testing.assert_allclose(full, analysis_rollout(analysis, "decoder.self_attn").maps[-1], atol=1e-6)
    assert np.all(np.triu(full, 1) == 0.0)
    at.toggle(key="rollout_residual").set_value(False).run()
    raw = chart(ok(at), "rollout_chart")
    np.testing.assert_allclose(z(raw), analysis_rollout(analysis, "decoder.self_attn", False).maps[-1], atol=1e-6)
    assert "raw" in raw["layout"]["title"]["text"]
    at.select_slider(key="rollout_layer").set_value(0).run()
    first = chart(ok(at), "rollout_chart")
    np.testing.assert_allclose(z(first), analysis.stacked("decoder.self_attn")[0].mean(axis=0), atol=1e-6)
    assert "layer 1," in first["layout"]["title"]["text"]
    at.button_group(key="rollout_heads").set_value([1]).run()
    assert "heads 2" in chart(ok(at), "rollout_chart")["layout"]["title"]["text"]
    at.button_group(key="rollout_heads").set_value([]).run()
    assert "at least one head" in errors(ok(at)) and not at.get("plotly_chart")


def test_a_link_that_names_the_attention_opens_the_rollout_of_it(app) -> None:
    at = app(model=ED, attention="decoder.cross_attn")
    at.switch_page(ROLLOUT_PAGE).run()
    assert ok(at).radio(key="attention").value == "decoder.cross_attn"
    assert at.query_params["attention"] == "decoder.cross_attn"


def test_rollout_page_with_empty_text_gives_a_message(app) -> None:
    at = app()
    at.switch_page(ROLLOUT_PAGE).run()
    at.text_area(key="text").input("   ").run()
    assert "empty" in errors(ok(at)) and not at.get("plotly_chart")
