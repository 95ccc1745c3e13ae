"""The weights / weight × value norm switch (ui.widgets.weighting_picker) on Explore, Paper view, Attention rollout
and Compare: each draws Sublayer.value_weighted's shares when switched, says so in its title, keeps the choice in the
URL across pages, and a trace file (no values) shows no switch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_app import LM, chart, ok, z

from analysis.analyze import analyze
from analysis.rollout import analysis_rollout
from inference.checkpoint import load_checkpoint

TEXT = "the cat sat on the mat"


def weighted(good_dir: Path, text: str = TEXT):
    return analyze(load_checkpoint(good_dir / LM), text).value_weighted()


def test_explore_draws_the_value_weighted_head_and_grid(app, good_dir: Path) -> None:
    at = ok(app(text=TEXT, L="2", H="3", weighting="norms"))
    assert at.radio(key="weighting").value == "norms"
    sublayer = weighted(good_dir).sublayers["decoder.layers.1.self_attn"]
    head = chart(at, "head_chart")
    np.testing.assert_allclose(z(head), sublayer.weights[2], atol=1e-6)
    assert "weight × value norm" in head["layout"]["title"]["text"]
    assert "weight × value norm" in chart(at, "grid")["layout"]["title"]["text"]
    at.radio(key="weighting").set_value("weights").run()
    plain = analyze(load_checkpoint(good_dir / LM), TEXT).sublayers["decoder.layers.1.self_attn"]
    np.testing.assert_allclose(z(chart(ok(at), "head_chart")), plain.weights[2], atol=1e-6)
    assert "weighting" not in at.query_params or at.query_params["weighting"] == "weights"


def test_the_choice_follows_to_rollout_paper_and_compare(app, good_dir: Path) -> None:
    at = ok(app(text=TEXT, weighting="norms"))
    at.switch_page("views/rollout.py").run()
    expected = analysis_rollout(weighted(good_dir), "decoder.self_attn", True, None).maps[-1]
    np.testing.assert_allclose(z(chart(ok(at), "rollout_chart")), expected, atol=1e-5)
    at.switch_page("views/paper.py").run()
    assert "weight × value norm" in chart(ok(at), "paper_chart")["layout"]["title"]["text"]
    at.switch_page("views/compare.py").run()
    assert at.radio(key="weighting").value == "norms"
    first = chart(ok(at), "compare_first")
    sublayer = weighted(good_dir).sublayers["decoder.layers.0.self_attn"]
    np.testing.assert_allclose(z(first), sublayer.weights[0], atol=1e-6)
    assert "weight × value norm" in chart(at, "compare_difference")["layout"]["title"]["text"]
