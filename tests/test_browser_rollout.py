"""The attention rollout page in a real browser (`streamlit run app.py` on the shipped checkpoints, headless
chromium): the heatmap is drawn with one row per output position and one column per input token, at a wide
and a small screen; screenshots go to screenshots/rollout*.png (git-ignored)."""

from __future__ import annotations

import pytest
from test_browser import ROOT, SHOTS

from analysis.analyze import analyze
from inference.checkpoint import load_checkpoint

pytestmark = pytest.mark.browser

# The drawn heatmap's (rows, columns): plotly.js's calculated matrix (typed arrays decoded), once painted.
SHAPE_JS = """() => {
  const gd = document.querySelector('.stPlotlyChart .js-plotly-plot');
  const z = gd && gd.calcdata && gd.calcdata[0] && gd.calcdata[0][0].z;
  if (!z || !gd.querySelector('.heatmaplayer image, .heatmaplayer .hm')) return null;
  return [z.length, z[0].length];
}"""


def open_page(browser, server: str, query: str, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{server}/rollout?{query}")
    page.get_by_role("heading", name="Attention rollout").wait_for()
    return context, page


def drawn_shape(page, title_part: str) -> list[int]:
    """The heatmap's shape once its title contains `title_part` and its image is painted."""
    page.wait_for_function(
        "t => [...document.querySelectorAll('.stPlotlyChart .gtitle')].some(e => e.textContent.includes(t))",
        arg=title_part,
    )
    return page.wait_for_function(SHAPE_JS).json_value()


def no_errors(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0


def test_rollout_of_the_reversal_model_encoder_and_cross(server, browser) -> None:
    analysis = analyze(load_checkpoint(ROOT / "checkpoints" / "reverse"), "abcdefgh")
    n_source, n_target = len(analysis.source_pieces), len(analysis.target_pieces)
    context, page = open_page(browser, server, "model=reverse&text=abcdefgh", 1600, 1000)
    try:
        assert drawn_shape(page, "Encoder") == [n_source, n_source]
        page.get_by_text("Decoder → source (through the encoder)").click()
        assert drawn_shape(page, "Decoder → source") == [n_target, n_source]
        page.wait_for_timeout(500)
        no_errors(page)
        page.screenshot(path=str(SHOTS / "rollout.png"), full_page=True)
    finally:
        context.close()


def test_rollout_of_the_language_model_on_a_small_screen(server, browser) -> None:
    text = "The cat sat on the mat because it was warm."
    n = len(analyze(load_checkpoint(ROOT / "checkpoints" / "lm-english"), text).target_pieces)
    context, page = open_page(browser, server, f"model=lm-english&text={text.replace(' ', '%20')}", 1024, 768)
    try:
        assert drawn_shape(page, "Rollout") == [n, n]
        # every head's pill in view: eight did not fit a third of the page, and pills do not wrap
        pills = page.locator(".st-key-rollout_heads button")
        assert pills.count() == 8
        main = page.locator('[data-testid="stMainBlockContainer"]').bounding_box()
        right = max(pills.nth(i).bounding_box()["x"] + pills.nth(i).bounding_box()["width"] for i in range(8))
        assert right <= main["x"] + main["width"], (right, main)
        chart = page.locator(".stPlotlyChart").first
        chart.locator(".nsewdrag").first.scroll_into_view_if_needed()  # below the fold at 768 px: hover needs it seen
        box = chart.locator(".nsewdrag").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.05, box["y"] + box["height"] * 0.95)  # bottom left: a cell
        hover = page.locator(".hoverlayer .hovertext").first
        hover.wait_for()
        assert "→" in hover.text_content()
        page.mouse.move(0, 0)
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        no_errors(page)
        page.screenshot(path=str(SHOTS / "rollout-1024x768.png"), full_page=True)
    finally:
        context.close()


def test_cross_rollout_of_the_translation_model_is_target_by_source(server, browser) -> None:
    text = "Where is the station?"
    analysis = analyze(load_checkpoint(ROOT / "checkpoints" / "translate-en-de"), text)
    n_source, n_target = len(analysis.source_pieces), len(analysis.target_pieces)
    assert n_source != n_target  # else a transposed map would pass
    context, page = open_page(browser, server, "model=translate-en-de&text=Where%20is%20the%20station%3F", 1600, 1000)
    try:
        page.get_by_text("Decoder → source (through the encoder)").click()
        assert drawn_shape(page, "Decoder → source") == [n_target, n_source]
        no_errors(page)
    finally:
        context.close()
