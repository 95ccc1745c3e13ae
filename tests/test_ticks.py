"""viz.ticks: the chart widths under which a chart's x tick labels are thinned, and the CSS that does it."""

from __future__ import annotations

import re

import numpy as np

from viz.heads import head_heatmap
from viz.style import frozen
from viz.ticks import label_pitch, thinning, thinning_css


def heatmap(n: int):
    pieces = [f"▁w{i}" for i in range(n)]
    return head_heatmap(np.full((n, n), 1 / n, dtype=np.float32), pieces, pieces, "a head")


def test_a_long_texts_keys_are_thinned_more_the_narrower_the_chart() -> None:
    steps = thinning(heatmap(100))  # 34 keys shown at -60°: about 19 px apart each
    ms, belows = [m for m, _ in steps], [b for _, b in steps]
    assert ms == list(range(2, 2 + len(ms))) and belows == sorted(belows, reverse=True)
    assert belows[0] > 800 > 350 > belows[-1]  # all 34 only on a wide chart; a phone's 342 px still has a step
    axis = frozen(heatmap(100))["layout"]["xaxis"]
    assert label_pitch(axis, {}) * 5 < 342 - 200  # a phone's chart keeps five or more of them


def test_a_few_tokens_keep_every_label_on_a_laptop() -> None:
    steps = thinning(heatmap(6))
    assert steps and steps[0][1] < 400  # six keys fit a 400 px chart


def test_the_css_is_one_rule_a_step_and_keeps_past_streamlits_sanitizer() -> None:
    css = thinning_css("head_chart", frozen(heatmap(100)))
    assert css.startswith(".st-key-head_chart{container-type:inline-size}")
    assert len(re.findall(r"@container \(max-width:[\d.]+px\)", css)) == len(thinning(heatmap(100)))
    assert not re.search(r"<[/\w]", css)  # DOMPurify drops a style whose text holds one
    assert thinning_css("k", {"layout": {"xaxis": {"showticklabels": False, "tickvals": ["a", "b"]}}}) == ""
