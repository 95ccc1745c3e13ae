"""512-token inputs: the math and masks pages draw a window or blocks, say so, stay small, and still tell the truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from analysis.record import Sublayer
from viz.masks import MAX_CELLS, mask_heatmap, reduced_note
from viz.steps import WINDOW, attention_steps, key_window, steps_figure, steps_table, weights_overview, window_note

pytestmark = pytest.mark.slow  # pages at 256 to 512 tokens (6 s): CI runs them

ROOT = Path(__file__).resolve().parents[1]
T = 512
FIGURE_BYTES = 100_000  # one figure's JSON at 512 tokens; every cell of a 512×512 mask would take ~360 kB
LONG_TEXT = " ".join("the cat sat on the mat and looked at the dog" for _ in range(80))  # > 512 tokens: cut


def figure_json(fig) -> dict:
    return json.loads(fig.to_json())


def z(fig: dict, trace: int = 0) -> np.ndarray:
    return np.asarray(decode_typed_array(fig["data"][trace]["z"]))


def long_sublayer(seed: int = 0, heads: int = 2, d_head: int = 8) -> Sublayer:
    """A causal self-attention sub-layer over T tokens with random scores and their true masked softmax."""
    rng = np.random.default_rng(seed)
    mask = np.tril(np.ones((T, T), dtype=bool))
    scores = rng.normal(size=(heads, T, T)).astype(np.float32)
    masked = np.where(mask, scores, -np.inf)
    weights = np.exp(masked - masked.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    pieces = tuple(f"▁t{i}" for i in range(T))
    values = rng.normal(size=(heads, T, d_head)).astype(np.float32)
    weights = weights.astype(np.float32)
    name = "decoder.layers.0.self_attn"
    return Sublayer(name, pieces, pieces, scores=scores, mask=mask, weights=weights, values=values)


# masks ---------------------------------------------------------------------------------------------------------------


def test_a_long_mask_is_drawn_as_the_share_of_allowed_pairs_in_each_block() -> None:
    mask = np.tril(np.ones((T, T), dtype=bool))
    mask[:, 300:] = False  # padding keys too
    fig = figure_json(mask_heatmap(mask, [f"q{i}" for i in range(T)], [f"k{i}" for i in range(T)], "m"))
    cells = z(fig)
    b = T // MAX_CELLS
    expected = mask.reshape(MAX_CELLS, b, MAX_CELLS, b).mean(axis=(1, 3))
    assert cells.shape == (MAX_CELLS, MAX_CELLS)
    np.testing.assert_allclose(cells, expected, atol=1e-4)
    # cells sit at their blocks' centres, in token positions from 1, so the thinned token ticks line up with them
    np.testing.assert_allclose(decode_typed_array(fig["data"][0]["x"])[:2], [1 + (b - 1) / 2, 1 + b + (b - 1) / 2])
    assert fig["layout"]["xaxis"]["tickvals"][0] == 1
    assert "text" not in fig["data"][0]
    assert len(fig["layout"]["xaxis"]["tickvals"]) <= 64


def test_short_masks_are_drawn_cell_by_cell_and_say_nothing_is_reduced() -> None:
    mask = np.tril(np.ones((MAX_CELLS, MAX_CELLS), dtype=bool))
    cells = z(figure_json(mask_heatmap(mask, ["a"] * MAX_CELLS, ["a"] * MAX_CELLS, "m")))
    assert cells.dtype == np.uint8 and (cells == mask).all()
    assert reduced_note(mask.shape) == ""


def test_the_reduced_mask_note_says_how_big_the_blocks_are() -> None:
    note = reduced_note((T, T))
    assert "512 × 512 tokens" in note and "blocks of about 8 × 8" in note and "share" in note
    assert "blocks of about 1 × 8" in reduced_note((20, T))


# attention math ------------------------------------------------------------------------------------------------------


def test_the_key_window_draws_exactly_the_keys_it_names() -> None:
    steps = attention_steps(long_sublayer(), head=1, query=T - 1)
    window = key_window(steps, 100)
    assert window == range(100, 100 + WINDOW)
    fig = figure_json(steps_figure(steps, window))
    raw = z(fig, 0).ravel()
    np.testing.assert_allclose(raw, steps.scores[100 : 100 + WINDOW], rtol=1e-6)
    np.testing.assert_allclose(z(fig, 2).ravel(), steps.weights[100 : 100 + WINDOW], rtol=1e-6)
    assert z(fig, 3).shape == (WINDOW, steps.d_head)
    ticks = fig["layout"]["yaxis"]["ticktext"]
    assert ticks[0].startswith("101:") and ticks[-1].startswith(f"{100 + WINDOW}:")
    table = steps_table(steps, window)
    assert len(table) == WINDOW and table["key"].iloc[0] == "101:▁t100"
    np.testing.assert_allclose(table["weight"], steps.weights[100 : 100 + WINDOW])


def test_the_default_window_holds_the_largest_weight_and_stays_inside_the_row() -> None:
    steps = attention_steps(long_sublayer(seed=3), head=0, query=T - 1)
    assert int(np.argmax(steps.weights)) in key_window(steps)
    assert key_window(steps, 10_000) == range(T - WINDOW, T)
    assert key_window(steps, -5) == range(0, WINDOW)
    short = attention_steps(long_sublayer(), head=0, query=3)
    assert len(key_window(short)) == WINDOW  # every query sees all T keys (masked ones too)


def test_the_overview_shows_every_weight_and_shades_the_window() -> None:
    steps = attention_steps(long_sublayer(), head=0, query=T - 1)
    fig = figure_json(weights_overview(steps, range(64, 128)))
    np.testing.assert_allclose(decode_typed_array(fig["data"][0]["y"]), steps.weights, rtol=1e-6)
    shape = fig["layout"]["shapes"][0]
    assert (shape["x0"], shape["x1"]) == (64.5, 128.5)
    assert window_note(range(64, 128), T).startswith("Showing keys 65–128 of 512")
    assert window_note(range(T), T) == ""


def test_figures_at_512_tokens_stay_small() -> None:
    sublayer = long_sublayer()
    steps = attention_steps(sublayer, head=0, query=T - 1)
    for fig in (
        steps_figure(steps, key_window(steps)),
        weights_overview(steps, key_window(steps)),
        mask_heatmap(sublayer.mask, sublayer.query_pieces, sublayer.key_pieces, "m"),
    ):
        assert len(fig.to_json()) < FIGURE_BYTES


# the pages, on the shipped checkpoints ------------------------------------------------------------------------------


@pytest.fixture
def long_app(monkeypatch: pytest.MonkeyPatch):
    if not (ROOT / "checkpoints" / "translate-en-de" / "model.safetensors").exists():
        pytest.skip("the shipped translate-en-de checkpoint is not here")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(ROOT / "checkpoints"))

    def make(page: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params.update(model="translate-en-de", attention="encoder.self_attn")
        at.session_state["text"] = LONG_TEXT
        at.run()
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return make


def charts(at: AppTest) -> dict[str, str]:
    return {el.key: el.proto.spec for el in at.get("plotly_chart")}


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_the_math_page_at_512_tokens_draws_a_window_and_says_so(long_app) -> None:
    at = long_app("views/attention_math.py")
    assert "Showing keys" in captions(at) and "of 512" in captions(at)
    specs = charts(at)
    assert {"steps_overview", "steps_chart", "output_chart"} <= set(specs)
    assert all(len(spec) < FIGURE_BYTES for spec in specs.values())
    at.slider(key="steps_first_key").set_value(1).run()
    assert "Showing keys 1–64 of 512" in captions(at)
    assert json.loads(charts(at)["steps_chart"])["layout"]["yaxis"]["ticktext"][0].startswith("1:")
    at.slider(key="steps_first_key").set_value(100).run()
    assert at.query_params["first_key"] == "100" and "Showing keys 100–163 of 512" in captions(at)  # linked


def test_the_masks_page_at_512_tokens_draws_blocks_and_says_so(long_app) -> None:
    at = long_app("views/masks.py")
    assert "512 × 512 tokens, drawn in blocks" in captions(at)
    specs = charts(at)
    assert "mask_encoder_self_attn" in specs and "mask_padding" in specs
    assert all(len(spec) < FIGURE_BYTES for spec in specs.values())


@pytest.mark.parametrize("page", ["views/positional.py", "views/head_stats.py"])
def test_the_other_pages_run_at_512_tokens(long_app, page: str) -> None:
    long_app(page)  # neither draws anything per token pair: positional shows the model's table, not the input
