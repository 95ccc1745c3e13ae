"""The Paper view: viz.paper's two columns of tokens joined by one line per weight, and its page in AppTest."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly_data import decode_typed_array
from streamlit.testing.v1 import AppTest

from inference.catalog import PAPER_SENTENCES, PRESETS
from ui.charts import AVERAGE
from viz.paper import (
    BUCKET_WIDTH,
    CROSS_COLUMNS,
    OUTSIDE,
    PALETTE,
    attention_lines,
    lines_above,
    opening_threshold,
    sublayer_lines,
)

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LM, ED = "lm-tiny", "translate-tiny"


def weights(n_heads: int, n_q: int, n_k: int, seed: int = 0) -> np.ndarray:
    """Rows that sum to 1 with a few large weights and many small ones, as trained heads have."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(n_k, 0.3), size=(n_heads, n_q)).astype(np.float32)


def as_json(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def segments(spec: dict) -> list[tuple[str, float, int, int]]:
    """(legend group, opacity, query, key) of every line segment drawn. A trace is one path of segments walked out
    and back, (OUTSIDE, q) → (0, q) → (1, k) → (0, q): only (0, q) → (1, k) lies inside the plot's x range [0, 1]."""
    found = []
    for trace in spec["data"]:
        if trace.get("mode") != "lines" or trace.get("showlegend") is not False:
            continue
        x, y = decode_typed_array(trace["x"]).reshape(-1, 4), decode_typed_array(trace["y"]).reshape(-1, 4)
        assert (x == [OUTSIDE, 0, 1, 0]).all() and (y[:, 0] == y[:, 1]).all() and (y[:, 1] == y[:, 3]).all()
        assert trace["line"]["simplify"] is False  # Plotly must not drop the retraced points
        for q, k in y[:, 1:3]:
            found.append((trace["legendgroup"], trace["opacity"], int(q), int(k)))
    assert spec["layout"]["xaxis"]["range"] == [0, 1] and OUTSIDE < 0  # the walk between segments is clipped
    return found


def head_of(group: str) -> int:
    return int(group.removeprefix("head ")) - 1


# the figure ---------------------------------------------------------------------------------------------------------


def test_one_legend_entry_and_colour_per_head() -> None:
    w = weights(4, 7, 7)
    spec = as_json(attention_lines(w, list("abcdefg"), list("abcdefg"), threshold=0.05))
    legend = [t for t in spec["data"] if t.get("showlegend") is not False]
    assert [t["name"] for t in legend] == ["head 1", "head 2", "head 3", "head 4"]
    assert [t["line"]["color"] for t in legend] == list(PALETTE[:4])
    for trace in spec["data"]:
        if "legendgroup" in trace:  # every line of a head is in its legend group and has its colour
            assert trace["line"]["color"] == PALETTE[head_of(trace["legendgroup"])]


@pytest.mark.parametrize("threshold", [0.05, 0.1, 0.3])
def test_a_segment_for_each_weight_above_the_threshold_with_that_opacity(threshold: float) -> None:
    w = weights(3, 9, 11, seed=1)
    spec = as_json(attention_lines(w, [f"q{i}" for i in range(9)], [f"k{j}" for j in range(11)], threshold=threshold))
    drawn = segments(spec)
    expected = {(h, q, k) for h, q, k in zip(*np.nonzero(w >= threshold))}
    assert len(drawn) == len(expected) and {(head_of(g), q, k) for g, _, q, k in drawn} == expected
    for group, opacity, q, k in drawn:
        assert abs(opacity - w[head_of(group), q, k]) <= BUCKET_WIDTH / 2 + 1e-6


def test_a_first_visit_opens_where_lines_are_drawn() -> None:
    spread = np.full((2, 3, 40), 1 / 40, dtype=np.float32)  # a long text: no weight reaches 0.10
    spread[1, 2, 5] += 0.063
    assert opening_threshold(spread, None, 0.1, 0.05) == 0.08
    assert len(lines_above(spread, opening_threshold(spread, None, 0.1, 0.05))) == 1
    assert opening_threshold(spread, 0, 0.1, 0.05) == 0.05  # nothing to draw: the slider's lowest
    spread[0, 0, 0] = 0.5
    assert opening_threshold(spread, None, 0.1, 0.05) == 0.1


def test_one_head_and_one_query_token() -> None:
    w = weights(4, 8, 8, seed=2)
    pieces = [f"t{i}" for i in range(8)]
    spec = as_json(attention_lines(w, pieces, pieces, heads=[2], query=5, threshold=0.05))
    drawn = segments(spec)
    assert [t["name"] for t in spec["data"] if t.get("showlegend") is not False] == ["head 3"]
    assert {(head_of(g), q) for g, _, q, _ in drawn} == {(2, 5)}
    assert sorted(k for *_, k in drawn) == np.flatnonzero(w[2, 5] >= 0.05).tolist()
    marked = spec["layout"]["yaxis"]["ticktext"][5]
    assert "<b>6:t5</b>" in marked and sum("<b>" in t for t in spec["layout"]["yaxis"]["ticktext"]) == 1


def test_cross_attention_puts_the_output_left_and_the_source_right() -> None:
    w = weights(2, 3, 5)
    spec = as_json(attention_lines(w, ["A", "B", "C"], list("vwxyz"), threshold=0.05, columns=CROSS_COLUMNS))
    assert spec["layout"]["yaxis"]["ticktext"] == ["1:A", "2:B", "3:C"]  # positions from 1
    assert spec["layout"]["yaxis2"]["ticktext"] == ["1:v", "2:w", "3:x", "4:y", "5:z"]
    assert spec["layout"]["yaxis2"]["side"] == "right"
    assert spec["layout"]["yaxis"]["title"]["text"] == CROSS_COLUMNS[0]
    assert max(q for *_, q, _ in segments(spec)) <= 2 and max(k for *_, k in segments(spec)) <= 4


def test_token_labels_and_title_are_escaped() -> None:
    pieces = ["<script>", "a&b", '"q"']
    spec = json.dumps(as_json(attention_lines(weights(1, 3, 3), pieces, pieces, query=0, title="<b>x</b>")))
    assert "<script" not in spec and "&lt;script&gt;" in spec and "&amp;b" in spec and "<b>x" not in spec


def test_bad_arguments_say_what_is_wrong() -> None:
    w = weights(2, 3, 3)
    with pytest.raises(ValueError, match="do not match"):
        attention_lines(w, list("ab"), list("abc"))
    with pytest.raises(ValueError, match="threshold"):
        attention_lines(w, list("abc"), list("abc"), threshold=0.0)
    with pytest.raises(ValueError, match="heads"):
        attention_lines(w, list("abc"), list("abc"), heads=[2])
    with pytest.raises(ValueError, match="query 3"):
        attention_lines(w, list("abc"), list("abc"), query=3)


@pytest.mark.parametrize("n", [3, 60])
def test_the_figure_is_what_plotly_validates(n: int) -> None:
    """attention_lines writes Plotly's JSON by hand (viz.style.unvalidated): validation must accept it unchanged."""
    pieces = [f"t{i}<&>" for i in range(n)]
    fig = attention_lines(weights(4, n, n), pieces, pieces, query=1 if n > 3 else None, threshold=0.05)
    assert json.loads(pio.to_json(go.Figure(fig.to_dict()))) == as_json(fig)


def test_256_tokens_draw_every_segment_and_stay_small() -> None:
    """The worst case the page allows: 8 heads × 256 queries, each spreading its weight evenly over 20 keys (the
    most lines a row can have at the page's lowest threshold, 0.05). Its time is bench/paper_lines.py's figure."""
    w = np.zeros((8, 256, 256), np.float32)
    for h in range(8):
        for q in range(256):
            w[h, q, (np.arange(20) * 7 + q + h) % 256] = 0.05
    pieces = [f"▁w{i}" for i in range(256)]
    text = pio.to_json(attention_lines(w, pieces, pieces, threshold=0.05), validate=False)
    assert len(segments(json.loads(text))) == 8 * 256 * 20
    assert len(text) < 2_500_000, len(text)


def test_the_papers_sentences_are_presets() -> None:
    assert set(PAPER_SENTENCES) <= set(PRESETS["lm"]) and set(PAPER_SENTENCES) <= set(PRESETS["translate"])
    assert PAPER_SENTENCES[0].startswith("It is in this spirit") and PAPER_SENTENCES[1].endswith("in my opinion.")


# the page -----------------------------------------------------------------------------------------------------------


@pytest.fixture
def paper(good_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., AppTest]:
    """`paper()` → the app on the Paper view, run against the tiny checkpoints."""
    monkeypatch.setenv("ATLAS_CHECKPOINTS", str(good_dir))

    def make() -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60).run()
        return at.switch_page("views/paper.py").run()

    return make


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def chart(at: AppTest) -> dict:
    charts = {el.key: el for el in at.get("plotly_chart")}
    assert "paper_chart" in charts, list(charts)
    return json.loads(charts["paper_chart"].proto.spec)


def legend(spec: dict) -> list[str]:
    return [t["name"] for t in spec["data"] if t.get("showlegend") is not False]


def test_page_draws_every_head_of_the_layer_then_one_head_and_one_token(paper) -> None:
    at = ok(paper())
    assert at.title[0].value == "Paper view"
    assert at.selectbox(key="head").options[-1] == "all heads"  # overlaid, not averaged
    at.selectbox(key="head").select(AVERAGE).run()
    spec = chart(ok(at))
    assert legend(spec) == ["head 1", "head 2", "head 3", "head 4"]
    n = len(spec["layout"]["yaxis"]["ticktext"])
    at.selectbox(key="head").select(1).run()
    at.selectbox(key="paper_query").select(2).run()
    spec = chart(ok(at))
    assert legend(spec) == ["head 2"] and "head 2" in spec["layout"]["title"]["text"]
    drawn = segments(spec)
    assert drawn and {q for *_, q, _ in drawn} == {2} and all(k <= 2 for *_, k in drawn)  # masked: no future keys
    at.slider(key="paper_threshold").set_value(1.0).run()
    assert "No weight reaches 1.00" in " ".join(i.value for i in ok(at).info)
    assert not segments(chart(at)) and len(chart(at)["layout"]["yaxis"]["ticktext"]) == n


@pytest.mark.parametrize("attention", ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"])
def test_page_draws_each_attention_of_an_encoder_decoder(paper, attention: str) -> None:
    at = paper()
    at.selectbox(key="model").select(ED).run()
    at.radio(key="attention").set_value(attention).run()
    at.slider(key="paper_threshold").set_value(0.05).run()
    spec = chart(ok(at))
    assert segments(spec) and len(legend(spec)) == 1
    if attention == "decoder.cross_attn":
        assert spec["layout"]["yaxis"]["title"]["text"] == CROSS_COLUMNS[0]


def test_page_escapes_tokens_and_explains_bad_text(paper) -> None:
    at = paper()
    at.text_area(key="text").input("<script>alert('x')</script> & <b>bold</b>").run()
    spec = json.dumps(chart(at))
    assert "<script" not in spec and "<b>bold" not in spec
    at.text_area(key="text").input("  \n ").run()
    assert "empty" in " ".join(e.value for e in at.error) and not at.get("plotly_chart") and not at.exception


def test_sublayer_lines_names_the_sublayer(good_dir: Path) -> None:
    from analysis.analyze import analyze
    from inference.checkpoint import load_checkpoint

    analysis = analyze(load_checkpoint(good_dir / ED), "Where is the station?", max_tokens=4)
    sublayer = analysis.sublayer("decoder.cross_attn", 0)
    spec = as_json(sublayer_lines(sublayer, threshold=0.05))
    assert spec["layout"]["title"]["text"] == "decoder.layers.0.cross_attn"
    assert spec["layout"]["yaxis2"]["title"]["text"] == CROSS_COLUMNS[1]
    assert len(segments(spec)) == int((sublayer.weights >= 0.05).sum())
