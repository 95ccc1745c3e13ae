"""A 390×844 phone in a real browser (touch, no hover): on Head ablation and Generate a table's toolbar, which a
phone shows always, covers nothing above the table. Screenshots go to screenshots/phone-*.png (git-ignored)."""

from __future__ import annotations

import pytest
from browser_support import settle
from test_browser import SHOTS

pytestmark = pytest.mark.browser
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}

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
