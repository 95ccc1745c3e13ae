"""A 390×844 phone in a real browser (touch, no hover): Generate's strip of how sure the model was writes every
token's percentage under it, each inside its own cell, none on another; on Head ablation and Generate a table's
toolbar, which a phone shows always, covers nothing above the table. Screenshots go to screenshots/phone-*.png
(git-ignored)."""

from __future__ import annotations

import pytest
from browser_support import settle
from test_browser import SHOTS

pytestmark = pytest.mark.browser
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}

# Every cell text of the strips shown (not display: none, nor in a chart that is), with its cell's size in pixels.
STRIP_TEXT = """() => [...document.querySelectorAll('[class*="st-key-certainty"] .js-plotly-plot')]
  .filter(gd => gd.checkVisibility()).flatMap(gd => {
    const trace = gd.calcdata[0][0], L = gd._fullLayout;
    const cell = L.xaxis._length / trace.z[0].length, row = L.yaxis._length / trace.z.length;
    // an SVG text under a group that is display: none passes checkVisibility(), with an empty box
    return [...gd.querySelectorAll('.heatmap-label text')].map(t => [t, t.getBoundingClientRect()])
      .filter(([t, r]) => getComputedStyle(t.parentElement).display !== 'none' && r.width > 0 && r.height > 0)
      .map(([t, r]) => ({text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom, cell, row}));
  })"""

# Each toolbar shown (Streamlit's, above a table or chart) against every other element of the page it meets.
TOOLBAR_COVERS = """() => {
  const out = [];
  for (const bar of document.querySelectorAll('[data-testid="stElementToolbar"]')) {
    if (!bar.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    const b = bar.getBoundingClientRect(), own = bar.closest('[data-testid="stElementContainer"]');
    for (const e of document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]')) {
      if (e === own || e.contains(own) || !e.checkVisibility()) continue;
      const r = e.getBoundingClientRect();
      if (r.height > 0 && r.left < b.right - 1 && b.left < r.right - 1 && r.top < b.bottom - 1 && b.top < r.bottom - 1)
        out.push(`the toolbar at y = ${b.top.toFixed(0)}–${b.bottom.toFixed(0)} covers `
                 + `"${e.innerText.trim().slice(0, 40)}" (y = ${r.top.toFixed(0)}–${r.bottom.toFixed(0)})`);
    }
  }
  return out; }"""


def test_the_strip_writes_every_percentage_inside_its_cell_on_a_phone(server, browser) -> None:
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/generate?model=lm-english")
        page.get_by_role("heading", name="Generate").first.wait_for()
        page.locator('[class*="st-key-certainty"] .heatmap-label').first.wait_for(state="attached")
        settle(page)
        texts = page.evaluate(STRIP_TEXT)
        shown = page.locator('[class*="st-key-certainty"] .js-plotly-plot:visible')
        shown.first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "phone-generate-certainty.png"))
        assert texts, "no token of the strip has its text shown on a phone"
        assert all("%" in t["text"] for t in texts), texts[:3]
        assert len(texts) == 60, f"{len(texts)} tokens of the 60 written have their percentage shown"
        for t in texts:
            assert t["right"] - t["left"] <= t["cell"], f"{t['text']!r} is wider than its cell ({t['cell']:.0f} px)"
            assert t["bottom"] - t["top"] <= t["row"], f"{t['text']!r} is taller than its row ({t['row']:.0f} px)"
        boxes = sorted(texts, key=lambda t: (round(t["top"]), t["left"]))
        for a, b in zip(boxes, boxes[1:], strict=False):
            if round(a["top"]) == round(b["top"]):
                assert a["right"] <= b["left"] + 1, f"{a['text']!r} runs into {b['text']!r}"
    finally:
        context.close()


@pytest.mark.parametrize("path", ["ablation?model=translate-en-de", "generate?model=translate-en-de"])
def test_a_tables_toolbar_covers_nothing_on_a_phone(server, browser, path: str) -> None:
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server}/{path}")
        page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first.wait_for()
        settle(page)
        covered = page.evaluate(TOOLBAR_COVERS)
        page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"phone-toolbar-{path.split('?')[0]}.png"))
        assert page.locator('[data-testid="stElementToolbar"]').count() > 0  # the toolbar is there, not hidden
        assert not covered, covered
    finally:
        context.close()
