"""Token labels in chromium at 1024×768: at 256 tokens Explore's head chart names position and
piece in every cell's hover, its axes read `position:piece`, and SmolLM2's byte-level pieces never show raw (Ġ, Ċ)."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
import test_browser_pretrained
from browser_support import SETTLED

from inference.pretrained.packages import SMOLLM2

pytestmark = pytest.mark.browser
LONG = "The cat sat on the mat, and the dog sat by the door. " * 30  # cut to lm-english's 256 tokens
CHART = ".st-key-head_chart .js-plotly-plot"
# Every cell of the drawn figure is on its row's and its column's category, the token label `i:piece` from 1
# (viz.style.category_axis), and the hover reads them (%{y}, %{x}); the ticks, at most 48, read the category
# they sit on. Returns what is wrong, [] when nothing is.
CHECK = """(sel) => {
  const plot = document.querySelector(sel), trace = plot.data[0], axes = plot.layout, wrong = [];
  const label = /^(\\d+):\\S+$/;
  for (const [name, cats] of [["y", trace.y], ["x", trace.x]]) {
    if (!cats || cats.length !== 256) wrong.push(`${name} of ${cats && cats.length} categories`);
    (cats || []).forEach((text, i) => {
      const m = label.exec(text);
      if (!m || +m[1] !== i + 1) wrong.push(`${name} ${i}: ${text}`);
    });
  }
  if (!trace.hovertemplate.startsWith("query %{y} → key %{x}: ")) wrong.push(trace.hovertemplate);
  for (const a of [axes.xaxis, axes.yaxis]) {
    if (a.type !== "category") wrong.push(`a ${a.type} axis`);
    if (a.ticktext.length > 48) wrong.push(`${a.ticktext.length} ticks`);
    a.ticktext.forEach((t, k) => { if (t !== a.tickvals[k] || !label.test(t)) wrong.push(`tick ${t}`); });
  }
  return wrong.slice(0, 5);
}"""


def hover_at(page, fx: float, fy: float) -> str:
    """The hover text of the head chart at (fx, fy) of its plot area, e.g. between two labelled ticks."""
    plot = page.locator(f"{CHART} .nsewdrag").first
    plot.scroll_into_view_if_needed()  # below the fold at 1024×768: a mouse outside the window hovers nothing
    box = plot.bounding_box()
    plot.hover(position={"x": box["width"] * fx, "y": box["height"] * fy}, force=True)
    hover = page.locator(".st-key-head_chart .hoverlayer .hovertext").first
    hover.wait_for()
    return hover.text_content().strip()


def opened(browser, url: str, timeout: int):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(timeout)
    page.goto(url)
    page.wait_for_function(SETTLED)
    page.locator(f"{CHART} .heatmaplayer image, {CHART} .heatmaplayer .hm").first.wait_for(state="attached")
    return context, page


def test_every_cell_of_a_256_token_head_names_position_and_piece(server, browser) -> None:
    context, page = opened(browser, f"{server}/?model=lm-english&text={quote(LONG)}", 90_000)
    try:
        assert page.evaluate(CHECK, CHART) == []
        # cells between the labelled ticks (every 6th of 256): query 208, key 95; query 141, key 34
        for fx, fy in ((0.37, 0.81), (0.13, 0.55)):
            text = hover_at(page, fx, fy)
            found = re.fullmatch(r"query (\d+):\S+ → key (\d+):\S+: [01]\.\d{3}", text)
            assert found, text
            query, key = int(found[1]), int(found[2])
            assert abs(query - (fy * 256 + 1)) <= 2 and abs(key - (fx * 256 + 1)) <= 2, text  # the cell under the mouse
    finally:
        context.close()


@pytest.fixture
def pretrained(published_server: str) -> str:
    """The session's server with the published models (tests/conftest.py)."""
    return published_server


@pytest.mark.slow
def test_smollm2_pieces_are_shown_as_text_never_as_raw_bytes(pretrained, browser) -> None:
    text = test_browser_pretrained.MODELS[SMOLLM2.name] + " Paris. Its rights"  # Ċ: tests/test_labels.py
    context, page = opened(browser, f"{pretrained}/?model={quote(SMOLLM2.name)}&text={quote(text)}", 180_000)
    try:
        shown = page.evaluate(
            f"""() => {{ const p = document.querySelector('{CHART}');
                return JSON.stringify([p.data[0].x, p.layout.xaxis.ticktext]); }}"""
        )
        assert not re.search("[ĠĊ]", shown), shown[:300]
        assert "10:▁rights" in shown  # `Ġrights`, as the text it stands for
        assert not re.search("[ĠĊ]", page.locator("[data-testid='stMain']").inner_text())
    finally:
        context.close()
