"""The sections of issue 51 in AppTest on the tiny checkpoints: Attention math's "Why does this query attend to a
key?" (the score split into the stream's parts, on demand) and Generate's "Fork here" (both continuations side by
side, and their heads at one step)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from analysis.analyze import analyze
from analysis.attribution import decoder_inputs
from analysis.score_parts import score_parts
from inference.checkpoint import load_checkpoint

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LM, ED = "lm-tiny", "translate-tiny"


@pytest.fixture
def app(good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., AppTest]:
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make(**query: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(query)
        return at.run()

    return make


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> dict[str, dict]:
    return {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def test_attention_math_splits_the_score_into_parts_that_sum_to_it(app, good_dir: Path) -> None:
    at = app(model=LM, text="the cat sat on the mat")
    at.switch_page("views/attention_math.py").run()
    assert "why_chart" not in charts(ok(at)), "the split runs the model: on demand"
    at.toggle(key="why_split").set_value(True).run()
    assert at.query_params["why"] == "1"
    query = at.selectbox(key="query").value
    key = at.selectbox(key="why_key").value
    at.selectbox(key="why_key").set_value(1).run()
    assert at.query_params["k"] == "2"  # as labelled
    fig = charts(ok(at))["why_chart"]
    z = np.array(fig["data"][0]["z"])
    ckpt = load_checkpoint(good_dir / LM)
    analysis = analyze(ckpt, "the cat sat on the mat")
    layer, head = at.selectbox(key="layer").value, at.selectbox(key="head").value
    raw = analysis.block("decoder.self_attn", layer).scores[head, query, 1]
    assert float(np.sum(z)) == pytest.approx(float(raw), abs=1e-4)
    source, ids = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    block = f"decoder.layers.{layer}.self_attn"
    np.testing.assert_allclose(z, score_parts(ckpt.model, ids, source, block, head, query, 1).table, atol=1e-6)
    assert "sum to" in " ".join(c.value for c in at.caption) and key is not None


def test_attention_math_splits_a_translators_cross_attention_score(app) -> None:
    at = app(model=ED, text="Where is the station?", attention="decoder.cross_attn")
    at.switch_page("views/attention_math.py").run()
    at.toggle(key="why_split").set_value(True).run()
    fig = charts(ok(at))["why_chart"]
    assert "key part" in json.dumps(fig["layout"]["xaxis"]) and fig["data"][0]["x"][0] == "token embeddings"
    assert len(fig["data"][0]["x"]) > len(fig["data"][0]["y"])  # the key side: the whole encoder's parts
