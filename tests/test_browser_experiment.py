"""Seed 003's experiment in a real browser: the Experiment page's table (one row per model, the report's figures
beside ours), its charts and the pruning curve whose first point is the model's own accuracy; Explore on a model of
the table with a blank, its heatmap the model's own weights; axe-core on both. Screenshots at 1600 wide and
1024×768 go to screenshots/ (git-ignored)."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pytest
from browser_support import settled_violations
from test_browser import ROOT, SHOTS

from analysis.analyze import analyze
from inference.checkpoint import load_checkpoint
from inference.experiment import PRUNED, ROWS, SEED_BEST

pytestmark = pytest.mark.browser

# The traces of the chart whose title starts with `title`, as plotly.js holds them (typed arrays as lists).
TRACES_JS = """title => {
  const gd = [...document.querySelectorAll('.stPlotlyChart .js-plotly-plot')]
    .find(g => ((g.layout.title || {}).text || '').replace(/<[^>]+>/g, '').startsWith(title) && g.calcdata);
  return gd ? gd.data.map(t => ({name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || [])})) : null;
}"""
# The one-head chart's matrix: the first painted heatmap of 4 × 4 (the all-heads grid below it is a mosaic).
HEAD_HEATMAP_JS = """() => {
  for (const gd of document.querySelectorAll('.stPlotlyChart .js-plotly-plot')) {
    const c = (gd.calcdata || []).find(c => c[0] && c[0].z && c[0].trace.type === 'heatmap');
    if (c && c[0].z.length === 4 && c[0].z[0].length === 4) return c[0].z.map(row => Array.from(row));
  }
  return null;
}"""


@pytest.mark.parametrize("size", [(1600, 1000), (1024, 768)])
def test_the_experiment_page_shows_the_table_and_the_pruning_curve(server, browser, size) -> None:
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/experiment")
        page.get_by_role("heading", name="More heads or more layers?").wait_for()
        ours = page.locator("table.atlas-table").filter(has_text="seed 003 accuracy")
        rows = ours.locator("tbody tr")
        rows.first.wait_for()
        assert rows.count() == len(ROWS)  # one row per model of the table
        assert [rows.nth(i).locator("th").inner_text() for i in range(rows.count())] == [r.name for r in ROWS]
        best = rows.filter(has_text="fivegram-3L-8H").first.inner_text()
        assert f"{SEED_BEST:.4f}" in best  # the report's figure beside ours
        traces = page.wait_for_function(TRACES_JS, arg="Heads pruned").json_value()
        for name in PRUNED:  # each model's curve starts at the model's own accuracy, no head removed
            curve = next(t for t in traces if t["name"] == name)
            accuracy = load_checkpoint(ROOT / "checkpoints" / name).card["metrics"]["accuracy"]
            assert curve["x"][0] == 0 and curve["y"][0] == pytest.approx(accuracy)
        assert page.wait_for_function(TRACES_JS, arg="Accuracy against layers").json_value()
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
        page.wait_for_timeout(500)
        shot = "experiment" + ("-1024x768" if size[0] < 1600 else "") + ".png"
        page.screenshot(path=str(SHOTS / shot), full_page=True)
    finally:
        context.close()


def test_explore_draws_a_model_of_the_table_on_a_sentence_with_a_blank(server, browser) -> None:
    text, model = "she opened the ___ and saw", "fivegram-3L-8H"
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        query = {"model": model, "text": text, "L": "3", "H": "2"}
        page.goto(f"{server}/?{urlencode(query)}")
        drawn = page.wait_for_function(HEAD_HEATMAP_JS).json_value()
        weights = analyze(load_checkpoint(ROOT / "checkpoints" / model), text).sublayers["encoder.layers.2.self_attn"]
        assert np.allclose(drawn, weights.weights[1], atol=1e-3)  # layer 3, head 2 (1-based in the address)
        guesses = page.locator("table.atlas-table").filter(has_text="probability")
        assert guesses.locator("tbody tr").count() == 5
        assert "guesses for the blank" in page.locator('[data-testid="stMainBlockContainer"]').inner_text()
        assert settled_violations(page) == []
        page.screenshot(path=str(SHOTS / "explore-fivegram.png"), full_page=True)
    finally:
        context.close()
