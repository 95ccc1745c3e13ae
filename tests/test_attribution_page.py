"""The Logit attribution page (views/attribution.py) in AppTest: it draws what analysis.attribution computes for the
sidebar's model and text, the bars sum to the logit, the choices come back from a copied link, and an encoder-only
model gets a sentence instead of a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest
from test_app import APP, ED, LM, chart, ok

from analysis.analyze import analyze
from analysis.attribution import attribute, decoder_inputs
from inference.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the cat sat on the mat"


def z(spec: dict, index: int = 0) -> np.ndarray:
    values = spec["data"][index]["z"]
    return decode_typed_array(values) if isinstance(values, dict) else np.asarray(values, dtype=float)


def test_the_page_draws_each_heads_part_and_bars_that_sum_to_the_logit(app, good_dir: Path) -> None:
    at = app(text=TEXT)
    at.switch_page("views/attribution.py").run()
    ok(at)
    ckpt = load_checkpoint(good_dir / LM)
    analysis = analyze(ckpt, TEXT)
    source, target = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    last = target.shape[1] - 1
    expected = attribute(ckpt, source, target, last)  # the last token's prediction, its top guess
    np.testing.assert_allclose(z(chart(at, "attribution_heads")), expected.heads["decoder.self_attn"], atol=1e-6)
    bars = chart(at, "attribution_parts")["data"][0]
    values = decode_typed_array(bars["x"]) if isinstance(bars["x"], dict) else bars["x"]
    assert sum(values) == pytest.approx(expected.logit, abs=1e-3)
    lens = chart(at, "logit_lens")
    assert z(lens).shape == (ckpt.config.n_decoder_layers + 1, target.shape[1])
    assert at.selectbox(key="dla_token").value == analysis.predictions[last][0].piece


def test_a_contrast_and_a_position_come_back_from_a_copied_link(app, good_dir: Path) -> None:
    ckpt = load_checkpoint(good_dir / LM)
    analysis = analyze(ckpt, TEXT)
    first, second = (p.piece for p in analysis.predictions[2][:2])
    at = app(text=TEXT, pos="3", dla_token=second, dla_versus=first)
    at.switch_page("views/attribution.py").run()
    ok(at)
    assert at.selectbox(key="dla_token").value == second and at.selectbox(key="dla_versus").value == first
    source, target = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    ids = {p.piece: p.id for p in analysis.predictions[2]}
    expected = attribute(ckpt, source, target, 2, ids[second], ids[first])
    np.testing.assert_allclose(z(chart(at, "attribution_heads")), expected.heads["decoder.self_attn"], atol=1e-6)
    assert at.query_params["dla_token"] == second and at.query_params["pos"] == "3"
    stale = app(text=TEXT, dla_token="▁nowhere-in-the-top-five")
    stale.switch_page("views/attribution.py").run()
    assert ok(stale).selectbox(key="dla_token").value == analysis.predictions[-1][0].piece


def test_a_translator_opens_on_its_first_output_word_with_both_attentions(app) -> None:
    at = app(model=ED, text="the cat sat")
    at.switch_page("views/attribution.py").run()
    ok(at)
    assert at.selectbox(key="position").value == 0
    spec = chart(at, "attribution_heads")
    assert len(spec["data"]) == 2  # decoder self-attention and cross-attention


def test_an_encoder_only_model_gets_a_sentence_not_a_traceback(monkeypatch, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(ROOT / "checkpoints" / "fivegram-1L-1H", tmp_path / "fivegram-1L-1H")
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/attribution.py").run()
    ok(at)
    assert "reads a decoder's stream" in " ".join(i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_the_input_tokens_are_traced_back_when_asked_and_match_the_analysis(app, good_dir: Path) -> None:
    """Nothing runs until the button is pressed; then the heatmap holds each method's numbers as
    analysis.token_attribution computes them for the page's prediction, and the table their raw values."""
    from analysis.token_attribution import METHODS, token_attribution

    at = app(text=TEXT)
    at.switch_page("views/attribution.py").run()
    assert not any(c.key == "tokens_back" for c in ok(at).get("plotly_chart")), "computed only when asked"
    at.button(key="tokens_run").click().run()
    ok(at)
    spec = chart(at, "tokens_back")
    ckpt = load_checkpoint(good_dir / LM)
    analysis = analyze(ckpt, TEXT)
    last = len(analysis.target_ids) - 1
    expected = token_attribution(ckpt, analysis, last, analysis.predictions[last][0].id)
    raw = np.asarray(spec["data"][0]["customdata"], dtype=float)
    assert [m for m in spec["data"][0]["y"]] == [m for m in METHODS if m in expected.scores]
    for row, method in zip(raw, expected.scores, strict=True):
        np.testing.assert_allclose(row, expected.scores[method], atol=1e-5)
    at.selectbox(key="position").set_value(2).run()
    assert not any(c.key == "tokens_back" for c in ok(at).get("plotly_chart")), "another position is asked again"
