"""Projector mode and small screens in a real browser: at 1024×768 and 1280×720, in projector mode and out of it, no
two numbers drawn in heatmap cells overlap, none is wider than its cell and none is in a type taller than its row
leaves room for (the translator's 11 rows at 1024×768 in projector mode), and no chart title runs past its chart
(right or top). Screenshots go to screenshots/projector-*.png (git-ignored)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from browser_support import settle
from test_browser import SHOTS

pytestmark = pytest.mark.browser

# For every chart: its title's right edge against the chart's, and the drawn cell numbers' boxes with the width of
# one cell of their heatmap (plot width / columns), all in screen pixels.
MEASURE_JS = """() => [...document.querySelectorAll('.stPlotlyChart .js-plotly-plot')].map(gd => {
  const box = gd.getBoundingClientRect();
  const title = gd.querySelector('.gtitle');
  const cells = [];
  gd.querySelectorAll('.heatmaplayer .hm').forEach((hm, i) => {
    const trace = gd.calcdata[i] && gd.calcdata[i][0];
    if (!trace || !trace.z) return;
    const xa = gd._fullLayout[trace.trace.xaxis === 'x' ? 'xaxis' : 'xaxis' + trace.trace.xaxis.slice(1)];
    const ya = gd._fullLayout[trace.trace.yaxis === 'y' ? 'yaxis' : 'yaxis' + trace.trace.yaxis.slice(1)];
    const cell = xa._length / trace.z[0].length, row = ya._length / trace.z.length;
    hm.querySelectorAll('.heatmap-label text').forEach(t => {
      if (getComputedStyle(t.parentElement).display === 'none' || !t.textContent) return;
      const r = t.getBoundingClientRect(), lines = t.querySelectorAll('tspan.line').length || 1;
      cells.push({left: r.left, right: r.right, top: r.top, bottom: r.bottom, cell, row, lines,
                  font: parseFloat(getComputedStyle(t).fontSize)});
    });
  });
  const t = title ? title.getBoundingClientRect() : null;
  return {right: box.right, top: box.top, titleRight: t ? t.right : 0, titleTop: t ? t.top : box.top,
          title: title ? title.textContent : '', cells};
})"""

PAGES = {  # name → (path, query, the heading to wait for)
    "explore": ("", {"model": "reverse", "text": "abcdefghijklmn"}, "Explore"),
    "explore-translator": ("", {"model": "translate-en-de"}, "Explore"),
    "rollout": ("rollout", {"model": "reverse", "text": "abcdefghij", "attention": "decoder.cross_attn"},
                "Attention rollout"),
    "masks": ("masks", {"model": "lm-english", "text": "The cat sat on the mat."}, "Masks"),
    "compare": ("compare",
                {"model": "lm-english", "text": "The animal didn't cross the street because it was too tired."},
                "Compare two inputs"),
}  # fmt: skip


# A row of numbers needs 1.2 em: their digits (0.65 em) and a gap as wide to the next row's, so rows never touch.
ROW_EM = 1.2


def overlaps(cells: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of number boxes that intersect (1 px of tolerance for anti-aliasing)."""
    rows: dict[int, list[dict]] = {}
    for c in cells:
        rows.setdefault(round(c["top"]), []).append(c)
    bad = []
    for row in rows.values():
        row.sort(key=lambda c: c["left"])
        bad += [(a, b) for a, b in zip(row, row[1:], strict=False) if a["right"] > b["left"] + 1]
    return bad


SIZES = ((1024, 768), (1280, 720))
# Which charts fill their container's width (their layout is as wide as it), by index among the page's charts.
STRETCHED = """() => [...document.querySelectorAll('.stPlotlyChart')].flatMap((c, i) => {
  const gd = c.querySelector('.js-plotly-plot');
  return c.clientWidth > 0 && gd && gd._fullLayout && Math.abs(gd._fullLayout.width - c.clientWidth) <= 1 ? [i] : [];
})"""
# Those charts fill their container again: Streamlit redraws a chart at its container's new width.
REDRAWN = f"(before) => {{ const now = ({STRETCHED})(); return before.every(i => now.includes(i)); }}"


def measure(page, name: str, size: tuple[int, int], projector: bool) -> None:
    """The page's charts at the window's size: titles inside, numbers inside their cells and their rows."""
    charts = page.evaluate(MEASURE_JS)
    assert charts
    where = f"{size[0]}x{size[1]}"
    for chart in charts:
        assert chart["titleRight"] <= chart["right"] + 1, f"{where}: title cut off: {chart['title']!r}"
        assert chart["titleTop"] >= chart["top"] - 1, f"{where}: title's top cut off: {chart['title']!r}"
        assert all(c["right"] - c["left"] <= c["cell"] + 1 for c in chart["cells"]), (where, chart["title"])
        assert not overlaps(chart["cells"]), (where, chart["title"])
        cramped = [c for c in chart["cells"] if c["font"] * ROW_EM * c["lines"] > c["row"] + 0.5]
        assert not cramped, f"{where}: {chart['title']!r}: numbers in a type taller than their rows: {cramped[:2]}"
    if projector:
        assert page.locator('[data-testid="stSidebar"][aria-expanded="true"]').count() == 0  # collapsed
        if name == "explore" and size[0] >= 1024:  # 15 tokens fit the full-width heatmap: the numbers are shown
            assert sum(len(c["cells"]) for c in charts) > 0
    assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
    mode = "projector" if projector else "plain"
    page.screenshot(path=str(SHOTS / f"{mode}-{name}-{where}.png"), full_page=True)


@pytest.mark.parametrize("projector", [True, False], ids=["projector", "plain"])
@pytest.mark.parametrize("name", list(PAGES))
def test_cell_numbers_fit_their_cells_and_titles_fit_their_charts(server, browser, name, projector) -> None:
    """Opened at the first size, then the window resized to the next, as a projector's laptop changes resolution:
    the server draws the same figures at every width, and the charts and their CSS follow the window."""
    path, query, heading = PAGES[name]
    query = {**query, **({"projector": "1"} if projector else {})}
    context = browser.new_context(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/{path}?{urlencode(query)}")
        page.get_by_role("heading", name=heading).first.wait_for()
        page.locator(".stPlotlyChart .heatmaplayer").first.wait_for(state="attached")
        for number, size in enumerate(SIZES):
            if number:
                stretched = page.evaluate(STRETCHED)
                assert stretched, "no chart fills its container's width"
                page.set_viewport_size({"width": size[0], "height": size[1]})
                page.wait_for_function(REDRAWN, arg=stretched)
            settle(page)  # the last charts and the CSS that hides numbers settle
            measure(page, name, size, projector)
    finally:
        context.close()
