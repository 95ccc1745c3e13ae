"""Point at a token (viz.highlight, Explore's "Point at a token"): its row and column outlined in every attention
figure of the page, on the cached figures as on those built with `point=`, and none without."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from viz.heads import head_heatmap, heads_grid
from viz.highlight import KEY, QUERY, point_at, pointed
from viz.style import frozen

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PIECES = ["<s>", "▁the", "▁cat", "▁sat", "▁on"]


def outlines(layout: dict) -> dict[str, list[dict]]:
    """The outlines of the token pointed at in a figure's layout, by name."""
    found: dict[str, list[dict]] = {QUERY: [], KEY: []}
    for shape in layout.get("shapes", []) or []:
        if shape.get("name") in found:
            found[shape["name"]].append(shape)
    return found


def weights(*shape: int) -> np.ndarray:
    w = np.random.default_rng(0).random(shape).astype(np.float32)
    return w / w.sum(axis=-1, keepdims=True)


def test_a_token_is_pointed_at_where_its_text_is_on_each_axis() -> None:
    assert pointed("decoder.self_attn", "decoder", 3) == (3, 3)
    assert pointed("encoder.self_attn", "encoder", 0) == (0, 0)
    assert pointed("decoder.cross_attn", "decoder", 3) == (3, None), "an output token reads, as query, only"
    assert pointed("decoder.cross_attn", "encoder", 2) == (None, 2), "an input token is read, as key, only"
    assert pointed("encoder.self_attn", "decoder", 1) == (None, None)


def test_the_heatmap_outlines_the_tokens_row_and_column_and_nothing_without_one() -> None:
    fig = head_heatmap(weights(5, 5), PIECES, PIECES, point=(2, 2)).to_dict()
    found = outlines(fig["layout"])
    (row,), (column,) = found[QUERY], found[KEY]
    assert (row["y0"], row["y1"], row["x0"], row["x1"]) == (1.5, 2.5, -0.5, 4.5)  # token 3's row, every key
    assert (column["x0"], column["x1"], column["y0"], column["y1"]) == (1.5, 2.5, -0.5, 4.5)
    assert not head_heatmap(weights(5, 5), PIECES, PIECES).to_dict()["layout"].get("shapes")
    only_row = head_heatmap(weights(5, 3), PIECES, PIECES[:3], point=(4, None)).to_dict()
    assert [len(v) for v in outlines(only_row["layout"]).values()] == [1, 0]


def test_the_grid_outlines_the_token_in_every_tile_even_when_tiles_average_tokens() -> None:
    grid = heads_grid(weights(2, 3, 5, 5), point=(1, 4)).to_dict()
    found = outlines(grid["layout"])
    assert len(found[QUERY]) == 2 and len(found[KEY]) == 3  # one per layer's row of tiles, one per head's column
    assert [(s["y0"], s["y1"]) for s in found[QUERY]] == [(0.5, 1.5), (5.5, 6.5)]
    assert [(s["x0"], s["x1"]) for s in found[KEY]] == [(3.5, 4.5), (8.5, 9.5), (13.5, 14.5)]
    long = heads_grid(weights(1, 2, 40, 40), max_size=10, point=(39, 0)).to_dict()  # tiles of 4 tokens a side
    found = outlines(long["layout"])
    assert [(s["y0"], s["y1"]) for s in found[QUERY]] == [(8.5, 9.5)], "token 40 is in the tile's last row"
    assert [(s["x0"], s["x1"]) for s in found[KEY]] == [(-0.5, 0.5), (9.5, 10.5)]
    assert not outlines(heads_grid(weights(2, 3, 5, 5)).to_dict()["layout"])[QUERY]


def test_a_cached_figure_pointed_at_draws_what_the_figure_built_with_the_token_draws() -> None:
    w = weights(2, 3, 5, 5)
    for build in (lambda p: head_heatmap(w[0, 0], PIECES, PIECES, point=p), lambda p: heads_grid(w, point=p)):
        cached = frozen(build(None))
        assert point_at(cached, (2, 3))["layout"]["shapes"] == frozen(build((2, 3)))["layout"]["shapes"]
        assert point_at(cached, (None, None)) is cached, "no token: the cached figure itself"


def drawn(at: AppTest) -> dict[str, dict[str, list[dict]]]:
    assert not at.exception, [e.value for e in at.exception]
    charts = {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    return {key: outlines(charts[key]["layout"]) for key in ("head_chart", "grid")}


def test_explore_points_at_a_token_in_the_heatmap_and_the_grid_and_a_link_keeps_it(app) -> None:
    at = app(model="lm-tiny", text="the cat sat on the mat")
    assert all(not shapes for figure in drawn(at).values() for shapes in figure.values()), "none: no outline"
    point = at.selectbox(key="point")
    assert point.options[0] == "none" and point.options[2].startswith("2:")  # counted from 1, shown as text
    assert point.value is None and point.proto.placeholder == "none"  # the box reads "none", not "Choose an option"
    point.select(1).run()
    figures = drawn(at)
    assert [(s["y0"], s["x0"]) for s in figures["head_chart"][QUERY] + figures["head_chart"][KEY]] == [
        (0.5, -0.5),
        (-0.5, 0.5),
    ]
    assert figures["grid"][QUERY] and figures["grid"][KEY]
    assert at.query_params["point"] == "2"
    linked = app(model="lm-tiny", text="the cat sat on the mat", point="2")
    assert linked.selectbox(key="point").value == 1 and drawn(linked)["head_chart"][QUERY]


def test_explore_on_a_translator_points_at_an_output_token_as_query_only_in_cross_attention(app) -> None:
    at = app(model="translate-tiny", text="Where is the station?", attention="decoder.cross_attn")
    options = at.selectbox(key="point").options
    first_output = next(i for i, label in enumerate(options) if label.startswith("decoder "))
    at.selectbox(key="point").set_value(first_output - 1).run()  # option 0 is "none": values count from 0 after it
    figures = drawn(at)
    assert figures["head_chart"][QUERY] and not figures["head_chart"][KEY]
    at.selectbox(key="point").set_value(0).run()  # the encoder's first token: a column, read by every query
    figures = drawn(at)
    assert figures["head_chart"][KEY] and not figures["head_chart"][QUERY]
