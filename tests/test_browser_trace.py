"""A trace exported from Explore, opened on the "Open a trace file" page in a real browser: the same heatmap values
as the page it came from; a bad file is one message, one over the cap is refused by the browser. Screenshots in
screenshots/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
from browser_support import settled_violations
from test_browser import ROOT, SHOTS, open_page

from analysis.analyze import analyze
from analysis.export import to_json
from inference.checkpoint import load_checkpoint
from ui import cache

pytestmark = pytest.mark.browser
TEXT = "The children walked to school in the rain."
# The one-head chart's matrix, once painted: a heatmap of a query × key shape (rows, columns) whose title names one
# head ("…, layer 1,<br>head 1"). The trace page paints rollout and mask heatmaps of that shape too, in its other
# tabs, sometimes before the head's: their titles name "all heads" or none.
HEATMAP_JS = r"""([rows, cols]) => {
  for (const gd of document.querySelectorAll('.stPlotlyChart .js-plotly-plot')) {
    const title = ((gd.layout || {}).title || {}).text || '';
    const c = (gd.calcdata || []).find(c => c[0] && c[0].z && c[0].trace.type === 'heatmap');
    if (/head \d/.test(title) && c && c[0].z.length === rows && c[0].z[0].length === cols)
      return c[0].z.map(row => Array.from(row));
  }
  return null;
}"""

# Compare's difference heatmap, by its title: its matrix.
DIFFERENCE_JS = """([rows, cols]) => {
  for (const gd of document.querySelectorAll('.stPlotlyChart .js-plotly-plot')) {
    const title = ((gd.layout || {}).title || {}).text || '';
    const c = (gd.calcdata || []).find(c => c[0] && c[0].z && c[0].trace.type === 'heatmap');
    if (title.includes('Second − first') && c && c[0].z.length === rows && c[0].z[0].length === cols)
      return c[0].z.map(row => Array.from(row));
  }
  return null;
}"""


ONE_BOX = '() => document.querySelectorAll(\'[data-testid="stFileUploader"] input[type="file"]\').length === 1'


def one_box(page):
    """The upload box, once the page's rerun has replaced the box that took the last file (on a loaded machine the
    old one is still drawn beside the new one for a moment)."""
    page.wait_for_function(ONE_BOX)
    return page.locator('[data-testid="stFileUploader"] input[type="file"]')


def test_an_exported_trace_shows_the_heatmap_it_was_exported_from(server, browser, tmp_path: Path) -> None:
    analysis = analyze(load_checkpoint(ROOT / "checkpoints" / "lm-english"), TEXT)
    n = len(analysis.target_pieces)
    trace = tmp_path / "lm-english.json"
    trace.write_text(to_json(analysis), encoding="utf-8")  # Explore's "Whole analysis as JSON", byte for byte
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 3, "kind": "decoder-only"}', encoding="utf-8")
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/?{urlencode({'model': 'lm-english', 'text': TEXT, 'L': '1', 'H': '1'})}")
        explored = page.wait_for_function(HEATMAP_JS, arg=[n, n]).json_value()
        page.goto(f"{server}/trace")
        page.get_by_role("heading", name="Open a trace file").wait_for()
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(trace))
        # the page opens on layer 1, head 1, as Explore does (AppTest checks the layer and head pickers)
        opened = page.wait_for_function(HEATMAP_JS, arg=[n, n]).json_value()
        assert np.allclose(opened, explored, atol=1e-5)  # the same values as the page it was exported from
        assert np.allclose(opened, analysis.sublayer("decoder.self_attn", 0).weights[0], atol=1e-5)
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
        page.screenshot(path=str(SHOTS / "trace-1024x768.png"), full_page=True)
        one_box(page).set_input_files(str(bad))
        error = page.locator('[data-testid="stAlertContentError"]')
        error.first.wait_for()
        assert error.count() == 1 and "cannot be opened" in error.inner_text() and "not a trace" in error.inner_text()
        assert page.locator('[data-testid="stException"]').count() == 0
        # Over the cap: the browser refuses it before sending a byte (Streamlit's own message, server.maxUploadSize).
        big = tmp_path / "big.json"
        with big.open("wb") as f:
            f.truncate((cache.MAX_UPLOAD_MB + 1) * 2**20)
        one_box(page).set_input_files(str(big))
        page.get_by_text(f"{cache.MAX_UPLOAD_MB:.1f}MB or smaller", exact=False).first.wait_for()
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()


def no_serious_violation(page) -> None:
    """axe-core on the page as it is (tests/test_browser_axe.py's rule: no serious or critical violation)."""
    assert settled_violations(page) == []


def test_explore_and_compare_draw_an_opened_trace(server, browser, tmp_path: Path) -> None:
    """Opened on its page, a trace is what Explore draws (reached by its link: the same session) and what Compare
    sets beside a second trace; screenshots of both at 1024×768 and 1600×900, axe-core on both."""
    model = load_checkpoint(ROOT / "checkpoints" / "lm-english")
    first, second = analyze(model, TEXT), analyze(model, TEXT.replace("rain", "snow"))
    n = len(first.target_pieces)
    paths = []
    for name, analysis in (("first", first), ("second", second)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(to_json(analysis), encoding="utf-8")
    for width, height in ((1024, 768), (1600, 900)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(90_000)
        try:
            page.goto(f"{server}/trace")
            page.get_by_role("heading", name="Open a trace file").wait_for()
            page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(paths[0]))
            page.locator('[data-testid="stMainBlockContainer"]').get_by_role("link", name="Explore").click()
            page.get_by_role("heading", name="Explore").wait_for()
            drawn = page.wait_for_function(HEATMAP_JS, arg=[n, n]).json_value()
            assert np.allclose(drawn, first.sublayer("decoder.self_attn", 0).weights[0], atol=1e-5)
            assert (
                page.locator('[data-testid="stSidebar"]').get_by_text("first.json").count() >= 1
            )  # the sidebar says which
            assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
            page.screenshot(path=str(SHOTS / f"trace-explore-{width}.png"), full_page=True)
            no_serious_violation(page)
            open_page(page, "Compare two inputs")
            page.get_by_role("heading", name="Compare two inputs").wait_for()
            page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(paths[1]))
            page.locator('[data-testid="stPlotlyChart"]').nth(2).wait_for()  # first, second, their difference
            a, b = (x.sublayer("decoder.self_attn", 0).weights[0] for x in (first, second))
            m = min(len(a), len(b))
            diff = page.wait_for_function(DIFFERENCE_JS, arg=[m, m]).json_value()
            assert np.allclose(diff, b[:m, :m] - a[:m, :m], atol=1e-5)
            assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
            page.screenshot(path=str(SHOTS / f"trace-compare-{width}.png"), full_page=True)
            no_serious_violation(page)
        finally:
            context.close()


def test_a_translator_trace_shows_its_output_and_every_steps_guesses(server, browser, tmp_path: Path) -> None:
    """A translator's trace on Explore reads as the model it came from: its output as words (not '▁' pieces) and,
    per decoding step, the top guesses the file holds, all of them in view (no column cut off beside the heatmap)."""
    model = load_checkpoint(ROOT / "checkpoints" / "translate-en-de")
    analysis = analyze(model, "The cat sat on the mat.")
    path = tmp_path / "cat.json"
    path.write_text(to_json(analysis), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/trace")
        page.get_by_role("heading", name="Open a trace file").wait_for()
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
        page.locator('[data-testid="stMainBlockContainer"]').get_by_role("link", name="Explore").click()
        page.get_by_role("heading", name="Predictions").wait_for()
        output = page.locator('[data-testid="stCode"]').first
        assert output.inner_text().strip() == analysis.output_text  # "Die Katze saß auf dem Mat."
        table = page.locator("table.atlas-table").filter(has_text="top guesses")
        assert table.locator("tbody tr").count() == len(analysis.predictions)
        first = table.locator("tbody tr").first.inner_text()
        assert all(f"{p.prob:.0%}" in first for p in analysis.predictions[0])  # every guess the file holds
        main = page.locator('[data-testid="stMain"]')
        assert main.evaluate("m => m.scrollWidth <= m.clientWidth + 1")  # nothing pushed off to the right
    finally:
        context.close()
