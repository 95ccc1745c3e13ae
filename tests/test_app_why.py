"""Two sections in AppTest on the tiny checkpoints: Attention math's "Why does this query attend to a
key?" (the score split into the stream's parts, on demand) and Generate's "Fork here" (both continuations side by
side, and their heads at one step)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from analysis.analyze import analyze
from analysis.attribution import decoder_inputs
from analysis.fork import fork
from analysis.score_parts import score_parts
from inference.checkpoint import load_checkpoint

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LM, ED = "lm-tiny", "translate-tiny"


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
    z = decode_typed_array(fig["data"][0]["z"])
    ckpt = load_checkpoint(good_dir / LM)
    analysis = analyze(ckpt, "the cat sat on the mat")
    layer, head = at.selectbox(key="layer").value, at.selectbox(key="head").value
    raw = analysis.sublayer("decoder.self_attn", layer).scores[head, query, 1]
    assert float(np.sum(z)) == pytest.approx(float(raw), abs=1e-4)
    source, ids = decoder_inputs(ckpt, analysis.text, analysis.target_ids)
    sublayer = f"decoder.layers.{layer}.self_attn"
    np.testing.assert_allclose(z, score_parts(ckpt.model, ids, source, sublayer, head, query, 1).table, atol=1e-6)
    assert "sum to" in " ".join(c.value for c in at.caption) and key is not None
    assert "<br>" not in fig["layout"]["title"]["text"], "one line at 1024 px: the detail is in the caption"
    assert f"Layer {layer + 1}, head {head + 1}. Rows" in " ".join(c.value for c in at.caption)
    at.selectbox(key="layer").set_value(0).run()  # nothing wrote before layer 1: the note says where heads show
    assert "choose a later layer" in " ".join(c.value for c in ok(at).caption)
    at.selectbox(key="layer").set_value(1).run()
    assert "choose a later layer" not in " ".join(c.value for c in ok(at).caption)


def test_attention_math_splits_a_translators_cross_attention_score(app) -> None:
    at = app(model=ED, text="Where is the station?", attention="decoder.cross_attn")
    at.switch_page("views/attention_math.py").run()
    at.toggle(key="why_split").set_value(True).run()
    fig = charts(ok(at))["why_chart"]
    assert "key part" in json.dumps(fig["layout"]["xaxis"]) and fig["data"][0]["x"][0] == "token embeddings"
    assert len(fig["data"][0]["x"]) > len(fig["data"][0]["y"])  # the key side: the whole encoder's parts


def test_generate_forks_at_the_step_and_shows_both_continuations_and_their_heads(app, good_dir: Path) -> None:
    at = app(model=LM, text="the cat sat", gen_tokens="6", gen_mode="greedy", gen_step="2")
    at.switch_page("views/generate.py").run()
    assert ok(at).selectbox(key="gen_fork").value == 0 and "fork_table" not in {d.key for d in at.dataframe}
    at.selectbox(key="gen_fork").set_value(2).run()
    assert at.query_params["gen_fork"] == "2"
    ckpt = load_checkpoint(good_dir / LM)
    written = analyze(ckpt, "the cat sat", continuation=6)
    position = len(written.target_pieces) - written.generated  # step 2 feeds the first written token
    prompt = list(written.target_ids[: position + 1])
    tok = ckpt.tokenizer
    expected = fork(ckpt.model, prompt, None, 0, 2, 20, tok.pieces, tok.never_written)
    codes = [c.value for c in ok(at).code]
    assert tok.decode(list(expected.greedy.ids)) in codes and tok.decode(list(expected.forked.ids)) in codes
    table = next(d.value for d in at.dataframe if "forked" in d.value.columns)
    assert table["step"].iloc[0] == 2 and table["p (forked)"].iloc[0] == f"{expected.forked.probs[0]:.3f}"
    at.slider(key="gen_fork_at").set_value(4).run()
    shown = charts(ok(at))
    layer, head = at.selectbox(key="layer").value, at.selectbox(key="head").value
    row = expected.forked.attention[2][f"decoder.layers.{layer}.self_attn"][head]
    np.testing.assert_allclose(decode_typed_array(shown["fork_forked_self_attn"]["data"][0]["y"]), row, atol=1e-6)
    assert "fork_greedy_self_attn" in shown


def test_generate_forks_a_translators_output_with_its_cross_attention(app) -> None:
    at = app(model=ED, text="Where is the station?", gen_step="1", gen_fork="3")
    at.switch_page("views/generate.py").run()
    shown = charts(ok(at))
    assert {"fork_greedy_cross_attn", "fork_forked_cross_attn", "fork_forked_self_attn"} <= set(shown)
    assert any("candidate 3" in el.value for el in at.markdown)
